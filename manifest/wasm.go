package manifest

import (
	"errors"
	"fmt"
	"unicode/utf8"
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

// module is what berm reads of a module's structure: enough to check the ABI's
// rules without decoding code, let alone compiling it.
type module struct {
	imports     []Import
	exports     []Export
	manifests   [][]byte // payloads of every .berm.abi section
	memoryPages uint64   // declared minimum of the first memory, in 64 KiB pages
	hasMemory   bool
}

const sectionName = ".berm.abi"

var errEOF = errors.New("unexpected end")

// reader walks a byte slice; every read is bounds-checked so that no input can
// make it panic, and every loop is bounded by the bytes left, so none can hang it.
type reader struct {
	b   []byte
	off int
}

func (r *reader) left() int { return len(r.b) - r.off }

func (r *reader) byte() (byte, error) {
	if r.off >= len(r.b) {
		return 0, errEOF
	}
	c := r.b[r.off]
	r.off++
	return c, nil
}

func (r *reader) bytes(n uint64) ([]byte, error) {
	if n > uint64(r.left()) {
		return nil, errEOF
	}
	b := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return b, nil
}

func (r *reader) uleb(maxBits uint) (uint64, error) {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		if shift >= maxBits || (shift+7 > maxBits && uint64(c&0x7f)>>(maxBits-shift) != 0) {
			return 0, errors.New("integer too large")
		}
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			return v, nil
		}
	}
}

func (r *reader) u32() (uint32, error) {
	v, err := r.uleb(32)
	return uint32(v), err
}

// count reads a vector length and rejects one that cannot fit in what is left,
// given that each element takes at least one byte.
func (r *reader) count() (int, error) {
	n, err := r.u32()
	if err != nil {
		return 0, err
	}
	if uint64(n) > uint64(r.left()) {
		return 0, errEOF
	}
	return int(n), nil
}

func (r *reader) name() (string, error) {
	n, err := r.u32()
	if err != nil {
		return "", err
	}
	b, err := r.bytes(uint64(n))
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", errors.New("name is not UTF-8")
	}
	return string(b), nil
}

func (r *reader) valueType() (ValueType, error) {
	c, err := r.byte()
	if err != nil {
		return 0, err
	}
	switch t := ValueType(c); t {
	case I32, I64, F32, F64, V128, FuncRef, ExternRef:
		return t, nil
	}
	return 0, fmt.Errorf("unsupported value type 0x%02x", c)
}

// limits reads a table or memory limits and returns the minimum.
func (r *reader) limits() (uint64, error) {
	flags, err := r.byte()
	if err != nil {
		return 0, err
	}
	if flags > 0x07 {
		return 0, fmt.Errorf("bad limits flags 0x%02x", flags)
	}
	bits := uint(32)
	if flags&0x04 != 0 {
		bits = 64
	}
	min, err := r.uleb(bits)
	if err != nil {
		return 0, err
	}
	if flags&0x01 != 0 {
		if _, err := r.uleb(bits); err != nil {
			return 0, err
		}
	}
	return min, nil
}

// parseModule reads the sections of a module that the ABI speaks of.
func parseModule(b []byte) (*module, error) {
	if len(b) < 8 || string(b[:4]) != "\x00asm" {
		return nil, ErrNotModule
	}
	if string(b[4:8]) != "\x01\x00\x00\x00" {
		// A component or a future binary format: not a core module of version 1.
		return nil, fmt.Errorf("binary version %x: %w", b[4:8], ErrNotModule)
	}
	m := &module{imports: []Import{}, exports: []Export{}}
	var types []FuncType
	var funcs []uint32 // type index of every function, imported ones first
	r := &reader{b: b, off: 8}
	lastRank := 0
	for r.left() > 0 {
		id, body, err := r.section()
		if err != nil {
			return nil, err
		}
		if id != 0 {
			rank := sectionRank(id)
			if rank == 0 {
				return nil, malformed(fmt.Sprintf("section %d", id), errors.New("unknown section id"))
			}
			if rank <= lastRank {
				return nil, malformed(fmt.Sprintf("section %d", id), errors.New("out of order or repeated"))
			}
			lastRank = rank
		}
		s := &reader{b: body}
		switch id {
		case 0:
			name, err := s.name()
			if err != nil {
				return nil, malformed("custom section", err)
			}
			if name == sectionName {
				m.manifests = append(m.manifests, body[s.off:])
			}
		case 1:
			if types, err = parseTypes(s); err != nil {
				return nil, malformed("type section", err)
			}
		case 2:
			if err := parseImports(s, m, types, &funcs); err != nil {
				return nil, malformed("import section", err)
			}
		case 3:
			n, err := s.count()
			if err != nil {
				return nil, malformed("function section", err)
			}
			for range n {
				t, err := s.u32()
				if err != nil {
					return nil, malformed("function section", err)
				}
				funcs = append(funcs, t)
			}
		case 5:
			n, err := s.count()
			if err != nil {
				return nil, malformed("memory section", err)
			}
			for i := range n {
				min, err := s.limits()
				if err != nil {
					return nil, malformed("memory section", err)
				}
				if i == 0 && !m.hasMemory {
					m.memoryPages, m.hasMemory = min, true
				}
			}
		case 7:
			if err := parseExports(s, m, types, funcs); err != nil {
				return nil, malformed("export section", err)
			}
		}
	}
	return m, nil
}

// section reads one section's id and body.
func (r *reader) section() (id byte, body []byte, err error) {
	if id, err = r.byte(); err != nil {
		return 0, nil, malformed("section header", err)
	}
	size, err := r.u32()
	if err != nil {
		return 0, nil, malformed("section header", err)
	}
	if body, err = r.bytes(uint64(size)); err != nil {
		return 0, nil, malformed(fmt.Sprintf("section %d", id), err)
	}
	return id, body, nil
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

func parseTypes(s *reader) ([]FuncType, error) {
	n, err := s.count()
	if err != nil {
		return nil, err
	}
	types := make([]FuncType, 0, n)
	for range n {
		form, err := s.byte()
		if err != nil {
			return nil, err
		}
		if form != 0x60 {
			return nil, fmt.Errorf("unsupported type form 0x%02x", form)
		}
		ft := FuncType{Params: []ValueType{}, Results: []ValueType{}}
		for _, dst := range []*[]ValueType{&ft.Params, &ft.Results} {
			k, err := s.count()
			if err != nil {
				return nil, err
			}
			for range k {
				t, err := s.valueType()
				if err != nil {
					return nil, err
				}
				*dst = append(*dst, t)
			}
		}
		types = append(types, ft)
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

func parseImports(s *reader, m *module, types []FuncType, funcs *[]uint32) error {
	n, err := s.count()
	if err != nil {
		return err
	}
	for range n {
		var imp Import
		if imp.Module, err = s.name(); err != nil {
			return err
		}
		if imp.Name, err = s.name(); err != nil {
			return err
		}
		kind, err := s.byte()
		if err != nil {
			return err
		}
		imp.Kind = ExternKind(kind)
		switch imp.Kind {
		case KindFunc:
			idx, err := s.u32()
			if err != nil {
				return err
			}
			if imp.Type, err = funcType(types, idx); err != nil {
				return err
			}
			*funcs = append(*funcs, idx)
		case KindTable:
			if _, err := s.valueType(); err != nil {
				return err
			}
			if _, err := s.limits(); err != nil {
				return err
			}
		case KindMemory:
			min, err := s.limits()
			if err != nil {
				return err
			}
			if !m.hasMemory {
				m.memoryPages, m.hasMemory = min, true
			}
		case KindGlobal:
			if _, err := s.valueType(); err != nil {
				return err
			}
			if _, err := s.byte(); err != nil {
				return err
			}
		case KindTag:
			if _, err := s.byte(); err != nil {
				return err
			}
			if _, err := s.u32(); err != nil {
				return err
			}
		default:
			return fmt.Errorf("import %s.%s: unknown kind 0x%02x", imp.Module, imp.Name, kind)
		}
		m.imports = append(m.imports, imp)
	}
	return nil
}

func parseExports(s *reader, m *module, types []FuncType, funcs []uint32) error {
	n, err := s.count()
	if err != nil {
		return err
	}
	for range n {
		var exp Export
		if exp.Name, err = s.name(); err != nil {
			return err
		}
		kind, err := s.byte()
		if err != nil {
			return err
		}
		idx, err := s.u32()
		if err != nil {
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
			if exp.Type, err = funcType(types, funcs[idx]); err != nil {
				return fmt.Errorf("export %q: %v", exp.Name, err)
			}
		}
		m.exports = append(m.exports, exp)
	}
	return nil
}
