//go:build wasip1

package main

import berm "github.com/berm-dev/berm/sdk"

// Each tool of berm.abi.json is an export named berm_tool_<name>.

//go:wasmexport berm_tool_greet
func greet() { berm.Handle(greetTool) }

//go:wasmexport berm_tool_count
func count() { berm.Handle(countTool) }

//go:wasmexport berm_tool_now
func now() { berm.Handle(nowTool) }
