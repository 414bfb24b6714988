package sweep

import (
	"testing"
	"time"
)

func TestWindow(t *testing.T) {
	at := func(hm string) time.Time {
		tt, err := time.Parse("2006-01-02 15:04", "2026-12-01 "+hm)
		if err != nil {
			t.Fatal(err)
		}
		return tt
	}
	night, err := ParseWindow("22:00-07:00")
	if err != nil {
		t.Fatal(err)
	}
	day, _ := ParseWindow("09:00-17:30")
	for _, c := range []struct {
		w    Window
		t    string
		in   bool
		next string
	}{
		{night, "23:00", true, "23:00"},
		{night, "06:59", true, "06:59"},
		{night, "07:00", false, "22:00"},
		{night, "12:00", false, "22:00"},
		{day, "08:59", false, "09:00"},
		{day, "17:29", true, "17:29"},
		{day, "17:30", false, "09:00"},
	} {
		if got := c.w.Contains(at(c.t)); got != c.in {
			t.Errorf("%v contains %s = %v", c.w, c.t, got)
		}
		next := c.w.Next(at(c.t))
		if next.Format("15:04") != c.next || next.Before(at(c.t)) {
			t.Errorf("%v next after %s = %v, want %s", c.w, c.t, next, c.next)
		}
	}
	for _, bad := range []string{"22:00", "25:00-07:00", "22:00-7:00", "ab:cd-07:00", "22:00-07:60", ""} {
		if _, err := ParseWindow(bad); err == nil {
			t.Errorf("ParseWindow(%q) accepted", bad)
		}
	}
}

func TestCreateUnitIsParsed(t *testing.T) {
	s, err := Load("testdata/create-unit.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !s.Hosts[0].CreateUnit {
		t.Error("create_unit: true not parsed")
	}
}
