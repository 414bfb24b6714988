package report

import "time"

// ReportTables is the summary and the points' tables of the report Write builds for s with opt
// (its doc, as prepare makes it for every format), for the external tests to hold LiveTables
// against.
func ReportTables(s *Sweep, opt Options) (Live, error) {
	if opt.Now.IsZero() {
		opt.Now = time.Unix(1700000000, 0)
	}
	d, err := prepare(s, &opt)
	if err != nil {
		return Live{}, err
	}
	return Live{SweepID: s.ID, Sweep: s.Name, State: s.State, Summary: d.Summary,
		Check: d.Check, Best: d.Best, Results: d.Results, Pruned: d.Pruned, Failures: d.Failures}, nil
}
