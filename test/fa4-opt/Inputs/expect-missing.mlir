func.func @k() {
  // expected-error @+1 {{never reported}}
  "fa4.tma_store_wait"() : () -> ()
  return
}
