package listing

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/uptrace/bun"
)

type projInner struct {
	City string `json:"city"`
	Zip  string `json:"zip,omitempty"`
}

type projEmbedded struct {
	Shared string `json:"shared"`
	Deep   int
}

// projCustom marshals through a pointer receiver, which json.Marshal calls
// for addressable values such as slice elements.
type projCustom struct{ v int }

func (c *projCustom) MarshalJSON() ([]byte, error) { return json.Marshal(map[string]int{"v": c.v}) }

type projZeroer struct{ n int }

func (z projZeroer) IsZero() bool                 { return z.n < 0 }
func (z projZeroer) MarshalText() ([]byte, error) { return []byte("z"), nil }

// projPlain is encoded field by field.
type projPlain struct {
	bun.BaseModel `bun:"table:x"`
	projEmbedded

	ID      int64          `json:"id,string"`
	Name    string         `json:"name"`
	Count   int            `json:"count,omitempty"`
	Flag    bool           `json:",omitempty"`
	When    time.Time      `json:"when"`
	Zero    time.Time      `json:"zero,omitzero"`
	Zeroer  projZeroer     `json:"zeroer,omitzero"`
	Ptr     *string        `json:"ptr"`
	Tags    []string       `json:"tags,omitempty"`
	Inner   projInner      `json:"inner"`
	Any     any            `json:"any,omitempty"`
	HTML    string         `json:"html"`
	Skip    string         `json:"-"`
	Dash    string         `json:"-,"` //nolint:staticcheck // the projection must name the field "-" as encoding/json does
	F       float64        `json:"f,string"`
	M       map[string]int `json:"m,omitzero"`
	Custom  projCustom     `json:"custom"`
	Obj     projInner      `json:"obj,string"` //nolint:staticcheck // a string option encoding/json ignores on a struct: the projection must too
	private int
}

// The following are encoded whole and then trimmed.
type projMarshaler struct{ ID, Name string }

func (m projMarshaler) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"id": m.ID, "name": m.Name, "extra": "x"})
}

type projEmbeddedPtr struct {
	*projEmbedded
	ID int `json:"id"`
}

type projStringOpt struct {
	ID int    `json:"id"`
	S  string `json:"s,string"`
}

type projClash struct {
	projEmbedded
	Shared string `json:"shared"`
	ID     int    `json:"id"`
}

func TestProject_Plan(t *testing.T) {
	if planFor(reflect.TypeFor[projPlain]()) == nil {
		t.Error("projPlain has no plan")
	}
	for _, typ := range []reflect.Type{
		reflect.TypeFor[projMarshaler](), reflect.TypeFor[projEmbeddedPtr](),
		reflect.TypeFor[projStringOpt](), reflect.TypeFor[projClash](), reflect.TypeFor[map[string]any](),
		reflect.TypeFor[time.Time](),
	} {
		if planFor(typ) != nil {
			t.Errorf("%s has a plan", typ)
		}
	}
}

func TestProject_MatchesEncodingJSON(t *testing.T) {
	s := "<p>"
	plain := []projPlain{
		{ID: 1, Name: "a", When: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), Ptr: &s, HTML: "<a&b>",
			Tags: []string{"x"}, Inner: projInner{City: "c"}, Any: 3, Dash: "d", F: 1.5, M: map[string]int{},
			Custom: projCustom{v: 7}, Zeroer: projZeroer{n: 1}, projEmbedded: projEmbedded{Shared: "s", Deep: 2}},
		{ID: 2, Count: 3, Flag: true, Zero: time.Unix(0, 0).UTC(), Zeroer: projZeroer{n: -1}, Skip: "hidden", private: 1},
	}
	all := []string{"name", "count", "Flag", "when", "zero", "zeroer", "ptr", "tags", "inner", "any", "html",
		"-", "f", "m", "custom", "obj", "shared", "Deep", "Skip", "private", "nope"}
	fieldSets := [][]string{{"name"}, {"id"}, {"inner", "nope"}, {"count", "Flag", "tags"}, all}

	check := func(name string, items any, fields []string) {
		t.Helper()
		full, err := json.Marshal(items)
		if err != nil {
			t.Fatal(err)
		}
		want := trimJSON(t, full, append([]string{"id"}, fields...))
		var got []byte
		switch items := items.(type) {
		case []projPlain:
			got, err = json.Marshal(Project(items, fields))
		case []*projPlain:
			got, err = json.Marshal(Project(items, fields))
		case []projMarshaler:
			got, err = json.Marshal(Project(items, fields))
		case []projEmbeddedPtr:
			got, err = json.Marshal(Project(items, fields))
		case []projStringOpt:
			got, err = json.Marshal(Project(items, fields))
		case []projClash:
			got, err = json.Marshal(Project(items, fields))
		case []map[string]any:
			got, err = json.Marshal(Project(items, fields))
		case []any:
			got, err = json.Marshal(Project(items, fields))
		}
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s, fields %v:\n got %s, %v\nwant %s", name, fields, got, err, want)
		}
	}
	for _, fields := range fieldSets {
		check("values", plain, fields)
		check("pointers", []*projPlain{&plain[0], nil, &plain[1]}, fields)
		check("marshaler", []projMarshaler{{ID: "1", Name: "n"}}, fields)
		check("embedded pointer", []projEmbeddedPtr{{ID: 1}, {ID: 2, projEmbedded: &projEmbedded{Shared: "x"}}}, fields)
		check("string option", []projStringOpt{{ID: 1, S: "x"}}, fields)
		check("clash", []projClash{{ID: 1, Shared: "outer"}}, fields)
		check("maps", []map[string]any{{"id": 1, "name": "n", "z": []int{1}}}, fields)
		check("mixed", []any{plain[0], "text", 5, nil, map[string]any{"name": 1}}, fields)
	}
}

// trimJSON is the reference: the array encoding/json writes, each object
// keeping only the named members, in order.
func trimJSON(t *testing.T, full []byte, keep []string) []byte {
	t.Helper()
	var elems []json.RawMessage
	if err := json.Unmarshal(full, &elems); err != nil {
		t.Fatal(err)
	}
	keepSet := map[string]bool{}
	for _, k := range keep {
		keepSet[k] = true
	}
	var out bytes.Buffer
	out.WriteByte('[')
	for i, elem := range elems {
		if i > 0 {
			out.WriteByte(',')
		}
		if elem[0] != '{' {
			out.Write(elem)
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(elem))
		if _, err := dec.Token(); err != nil { // the object's opening brace
			t.Fatal(err)
		}
		out.WriteByte('{')
		n := 0
		for dec.More() {
			tok, _ := dec.Token()
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				t.Fatal(err)
			}
			if !keepSet[tok.(string)] {
				continue
			}
			if n > 0 {
				out.WriteByte(',')
			}
			key, _ := json.Marshal(tok.(string))
			out.Write(key)
			out.WriteByte(':')
			out.Write(raw)
			n++
		}
		out.WriteByte('}')
	}
	out.WriteByte(']')
	return out.Bytes()
}

func TestProject_NoFields(t *testing.T) {
	items := []projInner{{City: "a"}}
	if got := Project(items, nil); !reflect.DeepEqual(got, items) {
		t.Errorf("Project(items, nil) = %#v", got)
	}
	b, _ := json.Marshal(Project([]projInner(nil), nil))
	if string(b) != "[]" {
		t.Errorf("nil items encode as %s", b)
	}
	b, _ = json.Marshal(Project([]projInner(nil), []string{"city"}))
	if string(b) != "[]" {
		t.Errorf("nil items with fields encode as %s", b)
	}
}

func TestProject_Example(t *testing.T) {
	at := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	items := []item{{ID: 12, Name: "Ann", Rank: 3, CreatedAt: at, Secret: "s"}}
	b, err := json.Marshal(Project(items, []string{"createdAt", "name"}))
	want := `[{"id":"12","name":"Ann","createdAt":"2024-01-02T03:04:05Z"}]`
	if err != nil || string(b) != want {
		t.Errorf("Project = %s, %v; want %s", b, err, want)
	}
}

type projFailing struct {
	ID  int        `json:"id"`
	Bad failingVal `json:"bad"`
}

type failingVal struct{}

func (failingVal) MarshalJSON() ([]byte, error) { return nil, errTest }

var errTest = &ParamError{Param: "x", Detail: "test"}

func TestProject_Errors(t *testing.T) {
	if _, err := json.Marshal(Project([]projFailing{{}}, []string{"bad"})); err == nil {
		t.Error("a failing field marshaler gave no error")
	}
	if _, err := json.Marshal(Project([]any{projFailing{}}, []string{"bad"})); err == nil {
		t.Error("a failing marshaler in the whole-item path gave no error")
	}
	if _, err := json.Marshal(Project([]any{make(chan int)}, []string{"bad"})); err == nil {
		t.Error("an unencodable item gave no error")
	}
}

func BenchmarkProject(b *testing.B) {
	items := make([]item, 100)
	for i := range items {
		items[i] = item{ID: int64(i), Name: "name", Rank: i, CreatedAt: time.Now()}
	}
	fields := []string{"name", "createdAt"}
	b.Run("plan", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(Project(items, fields)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("whole", func(b *testing.B) {
		anyItems := make([]any, len(items))
		for i := range items {
			anyItems[i] = items[i]
		}
		for b.Loop() {
			if _, err := json.Marshal(Project(anyItems, fields)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
