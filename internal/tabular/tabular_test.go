package tabular

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

var (
	cols = []string{"name", "n", "x", "none", "blob"}
	rows = [][]any{
		{"a", int64(3), 1.23456, nil, []byte("b1")},
		{"multi\nline", int64(-1), math.NaN(), nil, []byte("b,2")},
	}
)

func TestTable(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, "table", cols, rows); err != nil {
		t.Fatal(err)
	}
	want := "name         n   x     none  blob\n" +
		"a            3   1.23  -     b1\n" +
		"multi\\nline  -1  NaN   -     b,2\n"
	if b.String() != want {
		t.Errorf("table:\n%q\nwant\n%q", b.String(), want)
	}
}

func TestCSV(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, "csv", cols, rows); err != nil {
		t.Fatal(err)
	}
	want := "name,n,x,none,blob\na,3,1.23456,,b1\n\"multi\nline\",-1,NaN,,\"b,2\"\n"
	if b.String() != want {
		t.Errorf("csv:\n%q\nwant\n%q", b.String(), want)
	}
}

func TestJSONKeepsColumnOrderAndNulls(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, "json", cols, rows); err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if len(got) != 2 || got[0]["x"] != 1.23456 || got[1]["x"] != nil || got[1]["blob"] != "b,2" || got[0]["none"] != nil {
		t.Errorf("json: %v", got)
	}
	if i, j := strings.Index(b.String(), `"name"`), strings.Index(b.String(), `"blob"`); i < 0 || j < i {
		t.Errorf("column order lost: %s", b.String())
	}
	b.Reset()
	if err := Write(&b, "json", cols, nil); err != nil || b.String() != "[]\n" {
		t.Errorf("empty json: %q %v", b.String(), err)
	}
}

func TestUnknownFormat(t *testing.T) {
	if err := Write(&bytes.Buffer{}, "xml", cols, rows); err == nil || !strings.Contains(err.Error(), "xml") {
		t.Errorf("want an error naming the format, got %v", err)
	}
}
