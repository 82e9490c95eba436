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
		return nil, withHint(fmt.Errorf("example %q: no such example", name),
			"the examples this binary carries: %s", strings.Join(examples.Names(), ", "))
	}
	return image, nil
}
