// Package report turns a recorded sweep into answers: the best configuration per concurrency level
// (with its speedup, the margin to the runner-up and whether that margin is inside run-to-run noise),
// the Pareto front of per-user against per-GPU throughput, a comparison of two sweeps, charts
// (gonum/plot, SVG and PDF) and self-contained HTML, Markdown and LaTeX documents.
//
// It reads only the store's public views (run_summary, point_summary; run_detail for the export's
// extra bench_serving figures) through the store's typed readers (store.DB.RunSummaries,
// PointSummaries, RunDetails), and the output check's evidence (the divergent answers) through
// store.DB.OutputChecks, on its read-only connection; it writes no SQL of its own. A point whose
// lossless output check failed (Point.Mismatch) is shown first and never ranked: it is never the
// best of a level, its runner-up or plateau, nor on the Pareto front.
package report
