"""PTX instruction semantics as pure NumPy functions over the lanes of a warp."""
