package runtime

import "github.com/berm-dev/berm/runtime/sandbox"

// OpenFiles returns how many files are open through p's granted
// directories: between calls, those held by its idle instances.
func OpenFiles(p *Program) int {
	n := 0
	for _, m := range p.mounts {
		n += m.(*sandbox.FS).OpenFiles()
	}
	return n
}
