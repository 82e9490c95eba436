// Command inittrap reads the host's clock during initialization on
// WebAssembly (init_wasip1.go), where a host links only berm.log:
// build_test.go expects berm build to warn that _initialize traps.
package main

import berm "github.com/berm-dev/berm/sdk"

func init() {
	berm.Syscalls("berm.now")
	berm.Tool("hello", "Says hello.", hello)
}

func main() {}

func hello(struct{}) (string, error) { return "hello", nil }
