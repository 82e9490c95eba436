//go:build wasip1

package main

import berm "github.com/berm-dev/berm/sdk"

// Not in berm build's native build, which runs the registrations with no
// host at all.
func init() { _ = berm.Now() }
