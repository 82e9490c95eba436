#!/usr/bin/env bash
# warm.sh measures issue 11's targets (calls that start warm) in one run: the default fast path and the plain one (BERM_PLAIN=1) side by side, with bare wazero, no deadline, native code and the Node MCP reference server as the references, then prints a table of medians, ratios and targets.
#
# In process (runtime/warm_bench_test.go): the tiny echo per call against
# wazero's instantiate + call + close, the Go-built example (back to back, and
# with the process idle between calls, as a server is), a SHA-256 kernel
# with its deadline against the same with none, echo calls per second on
# every core, and the VmHWM of 1,000 echo calls held in flight. Over
# processes: the Go example's tools/call p50 through berm serve --stdio, the
# whole berm run of the kernel against the native build of the same C, and
# mcpserve/testdata/bench.sh (berm's echo against server-everything over
# stdio) once per path. testdata/bench/warmbench does the measuring; extra
# arguments go to it (-count 3, -runs 2, -mib 16, -mcpbench= to skip the MCP
# echo). A few minutes on two cores; it exits 1 when a target is missed, after
# printing every figure.
#
#   bash testdata/bench/warm.sh            # or: make bench-warm
set -euo pipefail
cd "$(dirname "$0")/../.."
export CGO_ENABLED=0

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/berm" .
go build -o "$work/warmbench" ./testdata/bench/warmbench
go test -c -o "$work/runtime.test" ./runtime
"${CC:-gcc}" -O2 -o "$work/kernel" runtime/testdata/kernel/kernel.c

export BERM_ROOT="$work/root"
"$work/berm" deploy hello examples/hello/hello.wasm >/dev/null
"$work/berm" deploy kernel runtime/testdata/kernel/kernel.wasm >/dev/null
unset BERM_ROOT

"$work/warmbench" -berm "$work/berm" -test "$work/runtime.test" -pkg runtime \
	-root "$work/root" -native "$work/kernel" -mcpbench mcpserve/testdata/bench.sh "$@"
