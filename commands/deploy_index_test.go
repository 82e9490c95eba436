package commands_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/berm-dev/berm/internal/registrytest"
	"github.com/berm-dev/berm/registry/index/indextest"
)

// TestDeployRefusesLayerTheIndexDisagreesWith: a reference an index lists
// (cloned into the root by a search) is deployed only when the registry
// serves the layer the index lists for its manifest digest; otherwise
// nothing is deployed or stored.
func TestDeployRefusesLayerTheIndexDisagreesWith(t *testing.T) {
	t.Parallel()
	host := registrytest.Start(t, nil)
	root, docker := t.TempDir(), t.TempDir()
	ref := host + "/demo/echo:v1"
	layer, manifestDigest := pushedDigests(t, run(t, bermEnv(t, t.TempDir(), docker, "push", ref, fixturePath("echo.wasm"))))

	listed := indextest.Entry(host, "demo/echo", "echo", "Echoes.", "Echoes its arguments.")
	listed.Digest = manifestDigest
	listed.Layer = indextest.Digest("not the layer the registry has")
	dir := t.TempDir()
	indextest.Init(t, dir)
	files := indextest.Generate("ghcr.io", 10)
	indextest.Add(files, listed)
	indextest.Commit(t, dir, files)
	if out := run(t, bermEnv(t, root, docker, "search", "--index", dir, "echoes")); !strings.Contains(out, ref+"@"+manifestDigest) {
		t.Fatalf("search:\n%s", out)
	}

	fails(t, bermEnv(t, root, docker, "deploy", "e", ref+"@"+manifestDigest), "index", listed.Layer)
	// By tag too: the registry's manifest digest is the one listed.
	fails(t, bermEnv(t, root, docker, "deploy", "e", ref), "index")
	if out := run(t, bermEnv(t, root, docker, "ls")); strings.Contains(out, "e ") {
		t.Fatalf("deployed all the same:\n%s", out)
	}
	if images, _ := filepath.Glob(filepath.Join(root, "images", "sha256", "*")); len(images) != 0 {
		t.Fatalf("stored all the same: %v", images)
	}

	// The index agreeing, the deploy goes through.
	listed.Layer = layer
	files = indextest.Generate("ghcr.io", 10)
	indextest.Add(files, listed)
	indextest.Commit(t, dir, files)
	run(t, bermEnv(t, root, docker, "search", "--refresh", "--index", dir, "echoes"))
	run(t, bermEnv(t, root, docker, "deploy", "e", ref+"@"+manifestDigest))
}
