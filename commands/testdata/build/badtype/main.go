// Command badtype registers a tool whose argument type JSON Schema cannot
// express: build_test.go expects berm build to refuse it, naming the field.
package main

import berm "github.com/berm-dev/berm/sdk"

func init() {
	berm.Tool("watch", "Watches.", watch)
}

func main() {}

type Options struct {
	Every  int         `json:"every"`
	Notify chan string `json:"notify"`
}

type WatchArgs struct {
	Path    string  `json:"path"`
	Options Options `json:"options"`
}

func watch(WatchArgs) (string, error) { return "", nil }
