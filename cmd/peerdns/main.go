// Command peerdns runs a peer-to-peer naming node or a metrics agent.
package main

func main() {}
