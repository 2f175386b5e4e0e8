// Package scaleout is analyze's pipeline run apart, for runs too large
// for one machine: export decodes and partitions each node's logs into
// Parquet files by tuple id (export.go), or cuts them to a time range as
// logs again (cut.go); join-part joins one partition elsewhere, a task of
// a distributed engine such as Apache Spark, into a state (part.go); and
// merge-parts merges the states into analyze's summaries (merge.go).
// The stages themselves are analyze's (analyze.Prepared, Decoded, Parts,
// Merger), the same code as analyze's own workers; this package owns the
// files between them (the export's layout, the states) and the checks
// that every record counts once (docs/spark.md).
package scaleout
