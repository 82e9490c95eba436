package manifest

import (
	"errors"
	"fmt"

	"github.com/berm-dev/berm/internal/wasmbin"
)

// ValueType is a WebAssembly value type, by its binary encoding.
type ValueType byte

const (
	I32       ValueType = 0x7f
	I64       ValueType = 0x7e
	F32       ValueType = 0x7d
	F64       ValueType = 0x7c
	V128      ValueType = 0x7b
	FuncRef   ValueType = 0x70
	ExternRef ValueType = 0x6f
)

func (t ValueType) String() string {
	switch t {
	case I32:
		return "i32"
	case I64:
		return "i64"
	case F32:
		return "f32"
	case F64:
		return "f64"
	case V128:
		return "v128"
	case FuncRef:
		return "funcref"
	case ExternRef:
		return "externref"
	}
	return fmt.Sprintf("0x%02x", byte(t))
}

// FuncType is the signature of a function.
type FuncType struct {
	Params  []ValueType `json:"params"`
	Results []ValueType `json:"results"`
}

// Equal reports whether two signatures are the same.
func (f FuncType) Equal(g FuncType) bool {
	return string(valueBytes(f.Params)) == string(valueBytes(g.Params)) &&
		string(valueBytes(f.Results)) == string(valueBytes(g.Results))
}

func valueBytes(ts []ValueType) []byte {
	b := make([]byte, len(ts))
	for i, t := range ts {
		b[i] = byte(t)
	}
	return b
}

// String renders the signature as ABI.md writes it: "[i64 i32 i32] -> [i64]".
func (f FuncType) String() string {
	return "[" + joinTypes(f.Params) + "] -> [" + joinTypes(f.Results) + "]"
}

func joinTypes(ts []ValueType) string {
	s := ""
	for i, t := range ts {
		if i > 0 {
			s += " "
		}
		s += t.String()
	}
	return s
}

// ExternKind is what an import or export is.
type ExternKind byte

const (
	KindFunc   ExternKind = 0
	KindTable  ExternKind = 1
	KindMemory ExternKind = 2
	KindGlobal ExternKind = 3
	KindTag    ExternKind = 4
)

func (k ExternKind) String() string {
	switch k {
	case KindFunc:
		return "func"
	case KindTable:
		return "table"
	case KindMemory:
		return "memory"
	case KindGlobal:
		return "global"
	case KindTag:
		return "tag"
	}
	return fmt.Sprintf("kind 0x%02x", byte(k))
}

// MarshalText names the kind in JSON output.
func (k ExternKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// MarshalText names the type in JSON output.
func (t ValueType) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText reads a type as MarshalText names it.
func (t *ValueType) UnmarshalText(b []byte) error {
	for _, v := range []ValueType{I32, I64, F32, F64, V128, FuncRef, ExternRef} {
		if v.String() == string(b) {
			*t = v
			return nil
		}
	}
	return fmt.Errorf("unknown value type %q", b)
}

// UnmarshalText reads a kind as MarshalText names it.
func (k *ExternKind) UnmarshalText(b []byte) error {
	for v := KindFunc; v <= KindTag; v++ {
		if v.String() == string(b) {
			*k = v
			return nil
		}
	}
	return fmt.Errorf("unknown kind %q", b)
}

// Import is one import of the module. Type is set for functions only.
type Import struct {
	Module string     `json:"module"`
	Name   string     `json:"name"`
	Kind   ExternKind `json:"kind"`
	Type   *FuncType  `json:"type,omitempty"`
}

// Export is one export of the module. Type is set for functions only.
type Export struct {
	Name string     `json:"name"`
	Kind ExternKind `json:"kind"`
	Type *FuncType  `json:"type,omitempty"`
}

// Table is one table the module defines, by its limits in entries. Max is
// nil when the table declares no maximum, and may then grow to 2^32-1
// entries. Imported tables are in Imports.
type Table struct {
	Min uint64  `json:"min"`
	Max *uint64 `json:"max,omitempty"`
}

// module is what berm reads of a module's structure: enough to check the ABI's
// rules without decoding code, let alone compiling it.
type module struct {
	imports     []Import
	exports     []Export
	manifests   [][]byte // payloads of every .berm.abi section
	tables      []Table  // the tables the module defines, in order
	memoryPages uint64   // declared minimum of the first memory, in 64 KiB pages
	hasMemory   bool
}

const sectionName = ".berm.abi"

// parseModule reads the sections of a module that the ABI speaks of. Each
// refusal names the section at fault, and the first problem in it.
func parseModule(b []byte) (*module, error) {
	if len(b) < len(wasmbin.Header) || string(b[:4]) != wasmbin.Magic {
		return nil, ErrNotModule
	}
	if string(b[4:8]) != wasmbin.Version {
		// A component or a future binary format: not a core module of version 1.
		return nil, fmt.Errorf("binary version %x: %w", b[4:8], ErrNotModule)
	}
	m := &module{imports: []Import{}, exports: []Export{}, tables: []Table{}}
	var types []FuncType
	var funcs []uint32 // type index of every function, imported ones first
	lastRank := 0
	for sec, err := range wasmbin.Sections(b) {
		if err != nil {
			return nil, fmt.Errorf("%v: %w", err, ErrMalformed)
		}
		if sec.ID != wasmbin.SectionCustom {
			rank := sectionRank(sec.ID)
			if rank == 0 {
				return nil, malformed(fmt.Sprintf("section %d", sec.ID), errors.New("unknown section id"))
			}
			if rank <= lastRank {
				return nil, malformed(fmt.Sprintf("section %d", sec.ID), errors.New("out of order or repeated"))
			}
			lastRank = rank
		}
		s := wasmbin.NewReader(sec.Payload)
		switch sec.ID {
		case wasmbin.SectionCustom:
			name, contents, err := customSection(sec.Payload)
			if err != nil {
				return nil, malformed("custom section", err)
			}
			if name == sectionName {
				m.manifests = append(m.manifests, contents)
			}
		case wasmbin.SectionType:
			if types, err = parseTypes(s); err != nil {
				return nil, malformed("type section", err)
			}
		case wasmbin.SectionImport:
			if err := parseImports(s, m, types, &funcs); err != nil {
				return nil, malformed("import section", err)
			}
		case wasmbin.SectionFunction:
			for range s.Count() {
				t := s.U32()
				if s.Err() != nil {
					break
				}
				funcs = append(funcs, t)
			}
			if err := s.Err(); err != nil {
				return nil, malformed("function section", err)
			}
		case wasmbin.SectionTable:
			for range s.Count() {
				t, err := table(s)
				if err != nil {
					return nil, malformed("table section", err)
				}
				m.tables = append(m.tables, t)
			}
			if err := s.Err(); err != nil {
				return nil, malformed("table section", err)
			}
		case wasmbin.SectionMemory:
			for i := range s.Count() {
				min, _, err := limits(s)
				if err != nil {
					return nil, malformed("memory section", err)
				}
				if i == 0 && !m.hasMemory {
					m.memoryPages, m.hasMemory = min, true
				}
			}
			if err := s.Err(); err != nil {
				return nil, malformed("memory section", err)
			}
		case wasmbin.SectionExport:
			if err := parseExports(s, m, types, funcs); err != nil {
				return nil, malformed("export section", err)
			}
		}
	}
	return m, nil
}

// customSection splits a custom section's payload into its name and what
// follows it.
func customSection(payload []byte) (name string, contents []byte, err error) {
	r := wasmbin.NewReader(payload)
	name = r.Name()
	return name, payload[r.Offset():], r.Err()
}

// sectionRank orders the known non-custom sections as the binary format requires
// (the tag section 13 sits between memory and global, data count 12 before code).
func sectionRank(id byte) int {
	switch {
	case id >= 1 && id <= 5:
		return int(id)
	case id == 13:
		return 6
	case id >= 6 && id <= 9:
		return int(id) + 1
	case id == 12:
		return 11
	case id == 10 || id == 11:
		return int(id) + 2
	}
	return 0
}

func malformed(where string, err error) error {
	return fmt.Errorf("%s: %v: %w", where, err, ErrMalformed)
}

// The parsers below read with a wasmbin.Reader, whose first failure sticks:
// each checks it before refusing a value, so the refusal names the first
// problem, as a reader stopping at once would.

func valueType(s *wasmbin.Reader) (ValueType, error) {
	c := s.Byte()
	if err := s.Err(); err != nil {
		return 0, err
	}
	switch t := ValueType(c); t {
	case I32, I64, F32, F64, V128, FuncRef, ExternRef:
		return t, nil
	}
	return 0, fmt.Errorf("unsupported value type 0x%02x", c)
}

// limits reads a table or memory limits and returns the minimum and the
// maximum, nil when there is none.
func limits(s *wasmbin.Reader) (uint64, *uint64, error) {
	flags := s.Byte()
	if err := s.Err(); err != nil {
		return 0, nil, err
	}
	if flags > 0x07 {
		return 0, nil, fmt.Errorf("bad limits flags 0x%02x", flags)
	}
	bound := func() uint64 { return uint64(s.U32()) }
	if flags&0x04 != 0 { // 64-bit
		bound = s.U64
	}
	min := bound()
	var max *uint64
	if flags&0x01 != 0 {
		m := bound()
		max = &m
	}
	if err := s.Err(); err != nil {
		return 0, nil, err
	}
	return min, max, nil
}

// table reads a table type, and the initializer that follows it when the
// entry opens with 0x40 0x00 (typed function references), to reach the next.
func table(s *wasmbin.Reader) (Table, error) {
	init := false
	b := s.Byte()
	if b == 0x40 {
		if r := s.Byte(); r != 0x00 && s.Err() == nil {
			return Table{}, fmt.Errorf("table with an initializer: reserved byte 0x%02x", r)
		}
		init, b = true, s.Byte()
	}
	if b == 0x63 || b == 0x64 { // (ref null? heaptype): an s33
		s.SkipLEB()
	}
	// Any other reference type is one byte; which are valid is wazero's to say.
	min, max, err := limits(s)
	if err != nil {
		return Table{}, err
	}
	if init {
		if err := s.SkipConstExpr(); err != nil {
			return Table{}, fmt.Errorf("table initializer: %v", err)
		}
	}
	return Table{Min: min, Max: max}, nil
}

func parseTypes(s *wasmbin.Reader) ([]FuncType, error) {
	n := s.Count()
	types := make([]FuncType, 0, n)
	for range n {
		if form := s.Byte(); form != 0x60 {
			if err := s.Err(); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("unsupported type form 0x%02x", form)
		}
		ft := FuncType{Params: []ValueType{}, Results: []ValueType{}}
		for _, dst := range []*[]ValueType{&ft.Params, &ft.Results} {
			for range s.Count() {
				t, err := valueType(s)
				if err != nil {
					return nil, err
				}
				*dst = append(*dst, t)
			}
		}
		types = append(types, ft)
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	return types, nil
}

func funcType(types []FuncType, idx uint32) (*FuncType, error) {
	if uint64(idx) >= uint64(len(types)) {
		return nil, fmt.Errorf("type index %d out of range", idx)
	}
	t := types[idx]
	return &t, nil
}

func parseImports(s *wasmbin.Reader, m *module, types []FuncType, funcs *[]uint32) error {
	for range s.Count() {
		imp := Import{Module: s.Name(), Name: s.Name()}
		kind := s.Byte()
		if err := s.Err(); err != nil {
			return err
		}
		imp.Kind = ExternKind(kind)
		switch imp.Kind {
		case KindFunc:
			idx := s.U32()
			if err := s.Err(); err != nil {
				return err
			}
			t, err := funcType(types, idx)
			if err != nil {
				return err
			}
			imp.Type = t
			*funcs = append(*funcs, idx)
		case KindTable:
			if _, err := valueType(s); err != nil {
				return err
			}
			if _, _, err := limits(s); err != nil {
				return err
			}
		case KindMemory:
			min, _, err := limits(s)
			if err != nil {
				return err
			}
			if !m.hasMemory {
				m.memoryPages, m.hasMemory = min, true
			}
		case KindGlobal:
			if _, err := valueType(s); err != nil {
				return err
			}
			s.Byte() // mutability
		case KindTag:
			s.Byte() // attribute
			s.U32()  // type index
		default:
			return fmt.Errorf("import %s.%s: unknown kind 0x%02x", imp.Module, imp.Name, kind)
		}
		if err := s.Err(); err != nil {
			return err
		}
		m.imports = append(m.imports, imp)
	}
	return s.Err()
}

func parseExports(s *wasmbin.Reader, m *module, types []FuncType, funcs []uint32) error {
	for range s.Count() {
		exp := Export{Name: s.Name()}
		kind := s.Byte()
		idx := s.U32()
		if err := s.Err(); err != nil {
			return err
		}
		exp.Kind = ExternKind(kind)
		if exp.Kind > KindTag {
			return fmt.Errorf("export %q: unknown kind 0x%02x", exp.Name, kind)
		}
		if exp.Kind == KindFunc {
			if uint64(idx) >= uint64(len(funcs)) {
				return fmt.Errorf("export %q: function index %d out of range", exp.Name, idx)
			}
			var err error
			if exp.Type, err = funcType(types, funcs[idx]); err != nil {
				return fmt.Errorf("export %q: %v", exp.Name, err)
			}
		}
		m.exports = append(m.exports, exp)
	}
	return s.Err()
}
