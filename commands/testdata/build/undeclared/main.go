// Command undeclared calls berm.Set and berm.Now without declaring them:
// build_test.go expects berm build to refuse it, naming both.
package main

import berm "github.com/berm-dev/berm/sdk"

func init() {
	berm.Syscalls("berm.get")
	berm.Tool("stamp", "Stamps.", stamp)
}

func main() {}

func stamp(struct{}) (string, error) {
	v, _ := berm.Get("n")
	if err := berm.Set("n", append(v, 'x')); err != nil {
		return "", err
	}
	return berm.Now().String(), nil
}
