package runtime_test

import "context"

// benchArgs are the tiny echo's arguments in the benchmarks (warm_bench_test.go).
var benchArgs = []byte(`{"message":"hello"}`)

// memoryKV is data that lasts the benchmark.
type memoryKV map[string][]byte

func (m memoryKV) Get(_ context.Context, program string, key []byte) ([]byte, bool, error) {
	v, ok := m[program+"\x00"+string(key)]
	return v, ok, nil
}

func (m memoryKV) Set(_ context.Context, program string, key, value []byte) error {
	m[program+"\x00"+string(key)] = append([]byte(nil), value...)
	return nil
}

func (m memoryKV) Delete(_ context.Context, program string, key []byte) error {
	delete(m, program+"\x00"+string(key))
	return nil
}
