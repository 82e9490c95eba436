// Command fixturecheck reads every fixture image with manifest.Read and checks
// that each is accepted or refused as it should be:
//
//	go run ./testdata/fixturecheck
//
// It prints one line per image (what Read said of it) and exits 1 when an
// image is accepted that should be refused, refused for another reason than
// the one it exists for, or missing from the table below. The images under
// broken/ that Read accepts but the runtime refuses (an imported memory or
// global, a minimum memory over the host's limit) are marked as such: the
// runtime's own tests hold them to that.
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/berm-dev/berm/manifest"
)

// want maps an image, relative to testdata/, to the refusal manifest.Read
// must give it; nil means Read accepts it.
var want = map[string]error{
	"echo.wasm":         nil,
	"core.wasm":         nil,
	"nest.wasm":         nil,
	"kv.wasm":           nil,
	"init.wasm":         nil,
	"init_syscall.wasm": nil,
	"imports.wasm":      nil,
	"maxmem.wasm":       nil,

	"broken/not_wasm.wasm":            manifest.ErrNotModule,
	"broken/component.wasm":           manifest.ErrNotModule,
	"broken/truncated.wasm":           manifest.ErrMalformed,
	"broken/no_memory.wasm":           manifest.ErrNoMemory,
	"broken/memory_not_memory.wasm":   manifest.ErrNoMemory,
	"broken/init_type.wasm":           manifest.ErrInitialize,
	"broken/no_section.wasm":          manifest.ErrNoManifest,
	"broken/two_sections.wasm":        manifest.ErrManyManifests,
	"broken/bad_json.wasm":            manifest.ErrJSON,
	"broken/not_utf8.wasm":            manifest.ErrJSON,
	"broken/abi_missing.wasm":         manifest.ErrABIVersion,
	"broken/abi_wrong.wasm":           manifest.ErrABIVersion,
	"broken/abi_string.wasm":          manifest.ErrABIVersion,
	"broken/no_tools.wasm":            manifest.ErrNoTools,
	"broken/tool_name_dot.wasm":       manifest.ErrToolName,
	"broken/tool_name_long.wasm":      manifest.ErrToolName,
	"broken/dup_tool.wasm":            manifest.ErrDuplicateTool,
	"broken/missing_export.wasm":      manifest.ErrToolExport,
	"broken/export_type.wasm":         manifest.ErrToolExport,
	"broken/schema_not_object.wasm":   manifest.ErrSchema,
	"broken/schema_bool.wasm":         manifest.ErrSchema,
	"broken/schema_invalid.wasm":      manifest.ErrSchema,
	"broken/schema_external_ref.wasm": manifest.ErrSchema,
	"broken/berm_import_other.wasm":   manifest.ErrBermImport,
	"broken/berm_syscall_type.wasm":   manifest.ErrBermImport,
	"broken/bad_call_name.wasm":       manifest.ErrCallName,
	"broken/import_memory.wasm":       nil,
	"broken/import_global.wasm":       nil,
	"broken/big_memory.wasm":          nil,
	"broken/table_big_min.wasm":       nil,
	"broken/table_big_max.wasm":       nil,
}

// byRuntime are the broken images that only the runtime refuses.
var byRuntime = map[string]string{
	"broken/import_memory.wasm": "imports a memory",
	"broken/import_global.wasm": "imports a global",
	"broken/big_memory.wasm":    "minimum memory over the limit",
	"broken/table_big_min.wasm": "table minimum over the limit",
	"broken/table_big_max.wasm": "table maximum over the limit",
}

func main() {
	dir := "testdata"
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	ok, err := check(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fixturecheck:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

func check(dir string) (bool, error) {
	var found []string
	for _, pattern := range []string{"*.wasm", "broken/*.wasm"} {
		m, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return false, err
		}
		for _, p := range m {
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return false, err
			}
			found = append(found, filepath.ToSlash(rel))
		}
	}
	sort.Strings(found)
	seen := map[string]bool{}
	ok := true
	for _, name := range found {
		seen[name] = true
		image, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return false, err
		}
		_, err = manifest.Read(image)
		expected, known := want[name]
		status := "ok  "
		switch {
		case !known:
			status, ok = "NEW ", false
		case expected == nil && err != nil, expected != nil && !errors.Is(err, expected):
			status, ok = "FAIL", false
		}
		said := "accepted"
		if err != nil {
			said = "refused: " + err.Error()
		}
		if why, ok := byRuntime[name]; ok && err == nil {
			said += " (the runtime refuses it: " + why + ")"
		}
		if status != "ok  " && expected != nil {
			said += fmt.Sprintf(" [want: %v]", expected)
		}
		fmt.Printf("%s %-32s %s\n", status, name, said)
	}
	var missing []string
	for name := range want {
		if !seen[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	for _, name := range missing {
		fmt.Printf("GONE %-32s is in the table but not in %s\n", name, dir)
		ok = false
	}
	return ok, nil
}
