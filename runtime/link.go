package runtime

import (
	"context"
	"fmt"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/berm-dev/berm/manifest"
)

// link resolves the program's imports from modules other than berm. Where the
// host's table for a module provides every function imported from it, with the
// same signature, the program links against the shared instance. Otherwise it
// gets a module of its own, anonymous and built once at deploy: the host's
// functions plus, for each import the host does not provide, a function that
// traps naming it. So a program always links, and what is missing traps only
// when called.
func (r *Runtime) link(ctx context.Context, p *Program) error {
	missing := map[string][]manifest.Import{}
	var order []string
	for _, imp := range p.Manifest.Imports {
		if imp.Module == "berm" || imp.Kind != manifest.KindFunc {
			continue
		}
		if r.provides(imp) {
			continue
		}
		if _, seen := missing[imp.Module]; !seen {
			order = append(order, imp.Module)
		}
		missing[imp.Module] = append(missing[imp.Module], imp)
	}
	if len(order) == 0 {
		return nil
	}
	own := map[string]api.Module{}
	for _, name := range order {
		b := p.wz.NewHostModuleBuilder(name)
		if hm := r.hostModules[name]; hm != nil {
			hm.Export(b)
		}
		for _, imp := range missing[name] {
			b.NewFunctionBuilder().
				WithGoModuleFunction(unprovided(imp), apiTypes(imp.Type.Params), apiTypes(imp.Type.Results)).
				Export(imp.Name)
		}
		compiled, err := b.Compile(r.listen(ctx, name))
		if err != nil {
			return fmt.Errorf("link %s: %w", name, err)
		}
		m, err := p.wz.InstantiateModule(ctx, compiled, wazero.NewModuleConfig().WithName(""))
		if err != nil {
			return fmt.Errorf("link %s: %w", name, err)
		}
		p.linked = append(p.linked, m)
		own[name] = m
	}
	p.resolver = func(name string) api.Module { return own[name] }
	return nil
}

// provides reports whether a host table has the import with its signature.
func (r *Runtime) provides(imp manifest.Import) bool {
	hm := r.hostModules[imp.Module]
	if hm == nil {
		return false
	}
	def, ok := hm.funcs[imp.Name]
	if !ok {
		return false
	}
	return sameTypes(def.ParamTypes(), imp.Type.Params) && sameTypes(def.ResultTypes(), imp.Type.Results)
}

func unprovided(imp manifest.Import) api.GoModuleFunc {
	msg := fmt.Sprintf("import %s.%s %s is not provided by this host", imp.Module, imp.Name, imp.Type)
	return func(context.Context, api.Module, []uint64) { panic(&trap{msg: msg}) }
}

func apiTypes(ts []manifest.ValueType) []api.ValueType {
	out := make([]api.ValueType, len(ts))
	for i, t := range ts {
		out[i] = api.ValueType(t)
	}
	return out
}

func sameTypes(a []api.ValueType, b []manifest.ValueType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != api.ValueType(b[i]) {
			return false
		}
	}
	return true
}
