// Command schema registers a tool whose argument type has every shape the
// schema inference handles: nested objects, slices, optional fields, enums
// and descriptions. build_test.go compares its manifest with manifest.json.
package main

import (
	"encoding/json"
	"time"

	berm "github.com/berm-dev/berm/sdk"
)

func init() {
	berm.Usage("**schema** is a test of berm build's schema inference.")
	berm.Syscalls("berm.get")
	berm.Calls("other.tool")
	berm.Tool("plan", "Plans a trip. Reach for it never: it is a test.", plan)
	berm.Tool("ping", "Answers pong.", func(struct{}) (string, error) { return "pong", nil })
}

func main() {}

// Mode is an enum of strings.
type Mode string

func (Mode) Enum() []any { return []any{"walk", "bike", "train"} }

// Level is an enum of integers.
type Level int

func (Level) Enum() []any { return []any{1, 2, 3} }

type Stop struct {
	Place  string      `json:"place" jsonschema:"where to stop"`
	Nights int         `json:"nights,omitempty" jsonschema:"how many nights, none by default"`
	Modes  []Mode      `json:"modes,omitempty" jsonschema:"how to get there"`
	Coords *[2]float64 `json:"coords,omitempty"`
}

type Traveller struct {
	Name string `json:"name"`
	Age  *uint8 `json:"age,omitempty" jsonschema:"in years"`
}

type common struct {
	Notes string `json:"notes,omitempty" jsonschema:"anything else"`
}

type PlanArgs struct {
	Title      string             `json:"title" jsonschema:"the trip's name"`
	Start      time.Time          `json:"start" jsonschema:"when it starts, RFC 3339"`
	Stops      []Stop             `json:"stops" jsonschema:"the stops, in order"`
	Travellers []Traveller        `json:"travellers,omitempty"`
	Level      Level              `json:"level,omitzero" jsonschema:"comfort, 1 to 3"`
	Mode       *Mode              `json:"mode,omitempty" jsonschema:"the default way to travel"`
	Budget     map[string]float64 `json:"budget,omitempty" jsonschema:"per category"`
	Extra      json.RawMessage    `json:"extra,omitempty" jsonschema:"any JSON, passed through"`
	Secret     func()             `json:"-"`
	hidden     int
	common
}

func plan(a PlanArgs) (string, error) {
	_, _ = berm.Get("last")
	_ = a.hidden
	return a.Title, nil
}
