package runtime

import (
	"bytes"
	"math"

	"github.com/berm-dev/berm/internal/wasmbin"
)

// A table declared without a maximum grows by table.grow to 2^32-1 entries,
// 8 bytes each in wazero, whatever the memory limit, and Go's linker declares
// its table so: such tables cannot be refused. boundTables gives them the
// maximum Check holds a module's tables to, and wazero's table.grow returns
// -1 past it, as memory.grow does past memory's. berm compiles the rewritten
// bytes; the program's identity stays the digest of the image as deployed.

// boundTables returns module with a maximum for every table it defines
// without one, or module itself when none lacks one or its table section is
// not one this reads in full. The tables are held to bound entries together,
// each counted as Check counts it (its maximum, or its minimum without one):
// what is left of bound is shared out equally between the tables without a
// maximum, each getting at least its minimum. Every byte but those of the
// table section is kept as it is.
//
// Imported tables are left alone: Check refuses them, as no host module
// provides one.
func boundTables(module []byte, bound uint32) (out []byte) {
	// A bug here must leave a program unbounded, not undeployable.
	defer func() {
		if recover() != nil {
			out = module
		}
	}()
	if b, ok := rewriteTables(module, bound); ok {
		return b
	}
	return module
}

// tableType locates the limits of a table in the table section's payload.
type tableType struct {
	flag   int // offset of the limits' flag byte
	minEnd int // just past the minimum
	min    uint64
	max    uint64
	hasMax bool
}

func rewriteTables(module []byte, bound uint32) ([]byte, bool) {
	if !bytes.HasPrefix(module, []byte(wasmbin.Header)) {
		return nil, false
	}
	var sec wasmbin.Section
	found := false
	for s, err := range wasmbin.Sections(module) {
		if err != nil {
			return nil, false
		}
		if s.ID == wasmbin.SectionTable {
			// A second one is wazero's to refuse.
			if found {
				return nil, false
			}
			sec, found = s, true
		}
	}
	if !found {
		return nil, false
	}
	tables, ok := parseTables(sec.Payload)
	if !ok {
		return nil, false
	}

	var total uint64
	unbounded := 0
	for _, t := range tables {
		if t.hasMax {
			total += max(t.min, t.max)
		} else {
			total += t.min
			unbounded++
		}
	}
	if unbounded == 0 {
		return nil, false
	}
	share := uint64(0)
	if total < uint64(bound) {
		share = (uint64(bound) - total) / uint64(unbounded)
	}

	payload := make([]byte, 0, len(sec.Payload)+6*unbounded)
	at := 0
	for _, t := range tables {
		if t.hasMax {
			continue
		}
		payload = append(payload, sec.Payload[at:t.flag]...)
		payload = append(payload, 0x01) // min max
		payload = append(payload, sec.Payload[t.flag+1:t.minEnd]...)
		payload = wasmbin.AppendULEB(payload, min(t.min+share, math.MaxUint32))
		at = t.minEnd
	}
	payload = append(payload, sec.Payload[at:]...)

	out := make([]byte, 0, len(module)+len(payload)-len(sec.Payload)+5)
	out = append(out, module[:sec.Start]...)
	out = wasmbin.AppendSection(out, wasmbin.SectionTable, payload)
	return append(out, module[sec.End:]...), true
}

// parseTables reads a table section's payload as wazero 1.12 does: a table
// is a reference type, limits of 32 bits, and an initializer when it opens
// with 0x40 0x00. Anything else (64-bit or shared limits, which wazero
// refuses, an unknown instruction in an initializer, bytes left over) is
// false, and the module is left to wazero as it is.
func parseTables(payload []byte) ([]tableType, bool) {
	r := wasmbin.NewReader(payload)
	n := r.Count()
	tables := make([]tableType, 0, n)
	for range n {
		b := r.Byte()
		init := b == 0x40
		if init {
			if r.Byte() != 0x00 {
				return nil, false
			}
			b = r.Byte()
		}
		// Any other reference type is one byte, whose validity is wazero's
		// to judge: only the limits are rewritten.
		if (b == 0x63 || b == 0x64) && !skipLEB(r, 5) { // (ref null? heaptype): an s33
			return nil, false
		}
		t := tableType{flag: r.Offset()}
		switch r.Byte() {
		case 0x00:
			t.min = uint64(r.U32())
		case 0x01:
			t.min = uint64(r.U32())
			t.minEnd = r.Offset()
			t.max, t.hasMax = uint64(r.U32()), true
		default:
			return nil, false
		}
		if !t.hasMax {
			t.minEnd = r.Offset()
		}
		if r.Err() != nil || init && r.SkipConstExpr() != nil {
			return nil, false
		}
		tables = append(tables, t)
	}
	return tables, r.Done()
}

// skipLEB reads past a LEB128 integer of at most n bytes, whatever its sign.
func skipLEB(r *wasmbin.Reader, n int) bool {
	for range n {
		c := r.Byte()
		if r.Err() != nil {
			return false
		}
		if c&0x80 == 0 {
			return true
		}
	}
	return false
}
