// Command thirdparty stands for a third-party program in TestThirdPartyCache:
// a module of its own, built as kube-state-metrics is, in a second.
package main

import "fmt"

func main() { fmt.Println("thirdparty") }
