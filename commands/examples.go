package commands

import (
	"fmt"
	"strings"

	"github.com/berm-dev/berm/examples"
)

// exampleImage returns an example program the binary carries.
func exampleImage(name string) ([]byte, error) {
	image, ok := examples.Image(name)
	if !ok {
		return nil, withHint(fmt.Errorf("example %q: no such example", name), "%s", examplesHint())
	}
	return image, nil
}

// examplesHint names the examples this binary carries, and how to deploy one.
func examplesHint() string {
	names := examples.Names()
	first := "hello" // the one --help begins with
	if !isExample(first) && len(names) > 0 {
		first = names[0]
	}
	return fmt.Sprintf("the examples this binary carries: %s; deploy one with berm deploy --example %s", strings.Join(names, ", "), first)
}

// isExample reports whether name is an example this binary carries.
func isExample(name string) bool {
	_, ok := examples.Image(name)
	return ok
}
