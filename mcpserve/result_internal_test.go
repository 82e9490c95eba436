package mcpserve

import (
	"strings"
	"testing"
)

// A JSON object result is also structured content, up to maxStructured: past
// it, the text alone, so that a result is not sent twice.
func TestStructuredContentBounded(t *testing.T) {
	small := []byte(`{"a":"b"}`)
	if res := resultContent("p", "t", small); res.StructuredContent == nil {
		t.Error("a small JSON object is not structured content")
	}
	big := []byte(`{"a":"` + strings.Repeat("x", maxStructured) + `"}`)
	if res := resultContent("p", "t", big); res.StructuredContent != nil || len(res.Content) != 1 {
		t.Errorf("a JSON object over %d bytes is sent twice", maxStructured)
	}
}
