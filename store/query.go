package store

import (
	"bytes"
	"context"
	"database/sql/driver"
	"fmt"
	"io"
	"strings"
)

// Rows is the result of a read-only query.
type Rows struct {
	Columns []string
	// Values holds one slice per row: int64, float64, string, []byte or nil.
	Values [][]any
}

// Query runs one read-only SQL statement (SELECT or WITH ... SELECT) on a
// separate connection that is opened read-only, has query_only set and
// denies everything except reading through an authorizer. A text holding
// more than one statement is refused with ErrBadQuery.
func (db *DB) Query(ctx context.Context, query string, args ...any) (*Rows, error) {
	rows, err := db.query1(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: query: %w", err)
	}
	return rows, nil
}

func (db *DB) query1(ctx context.Context, query string, args ...any) (*Rows, error) {
	var out *Rows
	var c rowCarver
	err := db.scan(ctx, query, args, func(cols []string, dest []driver.Value) error {
		out.Values = append(out.Values, c.row(dest))
		return nil
	}, func(cols []string) {
		out = &Rows{Columns: cols}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scan runs one read-only statement on the query connection and hands each row to fn (the
// slice is reused between rows; []byte values must be copied to be kept). start, if given, is
// called once with the column names before the first row.
func (db *DB) scan(ctx context.Context, query string, args []any, fn func(cols []string, row []driver.Value) error,
	start ...func(cols []string)) error {
	if err := singleStatement(query); err != nil {
		return err
	}
	conn, err := db.query.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	named := make([]driver.NamedValue, len(args))
	for i, a := range args {
		v, err := driver.DefaultParameterConverter.ConvertValue(a)
		if err != nil {
			return fmt.Errorf("argument %d: %w", i+1, err)
		}
		named[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	// The driver's rows are read directly: for large results, database/sql's
	// per-value Scan doubles the cost of reading them.
	return conn.Raw(func(dc any) error {
		qc, ok := dc.(driver.QueryerContext)
		if !ok {
			return fmt.Errorf("driver %T cannot query", dc)
		}
		rows, err := qc.QueryContext(ctx, query, named)
		if err != nil {
			return err
		}
		defer rows.Close()
		cols := rows.Columns()
		for _, f := range start {
			f(cols)
		}
		dest := make([]driver.Value, len(cols))
		for {
			if err := rows.Next(dest); err != nil {
				if err == io.EOF {
					return nil
				}
				return err
			}
			if err := fn(cols, dest); err != nil {
				return err
			}
		}
	})
}

// RunsQuery selects rows of run_summary.
type RunsQuery struct {
	// Sweep restricts to one sweep: its id or name (the latest of that
	// name); "" for all sweeps.
	Sweep string
	// SweepID restricts to one sweep by id (instead of Sweep); 0 for none.
	SweepID int64
	// OK keeps only the ok runs (those that count: docs/schema.md).
	OK bool
	// Where is a user SQL expression over run_summary's columns, e.g.
	// "concurrency = 16 AND status = 'ok'".
	Where string
	// OrderBy is a user ORDER BY list, e.g. "output_tok_s DESC". Ties, and
	// the default, follow sweep_id, plan order, concurrency, repeat, the
	// cell (dataset, then input_tokens; NULL first) and attempt.
	OrderBy string
	// Limit caps the number of rows; 0 means no limit.
	Limit int
}

// runSummaryColumns are run_summary's columns, in the contract's order.
var runSummaryColumns = []string{"sweep", "sweep_id", "point_id", "host", "method", "num_steps", "topk",
	"num_draft_tokens", "tp", "concurrency", "repeat", "status", "requests", "completed", "failed",
	"output_tok_s", "request_s", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "tpot_p50_ms",
	"e2e_p50_ms", "accept_length", "speedup", "started_at", "finished_at", "accept_length_source", "dataset",
	"input_tokens", "ci_metric", "ci_low", "ci_high", "ci_confidence", "precision_reached"}

// QueryRuns reads run_summary rows on the read-only connection. Where and
// OrderBy are the user's SQL; errors in them come back as ErrBadQuery
// naming the expression. The expressions may also use the extra columns of
// the run_detail view (docs/schema.md).
func (db *DB) QueryRuns(ctx context.Context, q RunsQuery) (*Rows, error) {
	out := &Rows{Columns: runSummaryColumns}
	var c rowCarver
	err := db.runsQuery(ctx, q, runSummaryColumns, func(dest []driver.Value) {
		out.Values = append(out.Values, c.row(dest))
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// singleStatement refuses SQL text holding a ";" outside string literals,
// quoted identifiers and comments: the text must not end the statement it
// is placed in, nor start another one.
func singleStatement(s string) error {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\'', '"', '`':
			j := i + 1
			for ; j < len(s); j++ {
				if s[j] == c {
					if j+1 < len(s) && s[j+1] == c { // doubled quote
						j++
						continue
					}
					break
				}
			}
			i = j
		case '[':
			j := strings.IndexByte(s[i:], ']')
			if j < 0 {
				return nil // unterminated: SQLite reports the syntax error
			}
			i += j
		case '-':
			if i+1 < len(s) && s[i+1] == '-' {
				j := strings.IndexByte(s[i:], '\n')
				if j < 0 {
					return nil
				}
				i += j
			}
		case '/':
			if i+1 < len(s) && s[i+1] == '*' {
				j := strings.Index(s[i+2:], "*/")
				if j < 0 {
					return nil
				}
				i += j + 3
			}
		case ';':
			return fmt.Errorf("more than one statement (%q at offset %d): %w", ";", i, ErrBadQuery)
		}
	}
	return nil
}

// rowCarver copies driver values into rows carved from shared chunks (fewer allocations than one
// slice a row); byte slices are cloned, as the driver reuses them.
type rowCarver struct{ chunk []any }

func (c *rowCarver) row(dest []driver.Value) []any {
	n := len(dest)
	if len(c.chunk) < n {
		c.chunk = make([]any, n*256)
	}
	row := c.chunk[:n:n]
	c.chunk = c.chunk[n:]
	for i, v := range dest {
		if b, ok := v.([]byte); ok {
			v = bytes.Clone(b)
		}
		row[i] = v
	}
	return row
}
