// Package export turns a job's items into a table: the grid in the UI and the
// files people download (CSV here; XLSX reuses Columns, Cells and Neutralize)
// show exactly the same columns and the same cell text, because both go
// through Columns and Cells.
//
// # Columns
//
// A job's table has four fixed columns, seq, status, attempts and error,
// followed by one column per key of the items' Result objects: the union of
// the keys of every item's Result, in first-seen order (items in the grid's
// order, that of Store.ListItems: by last change, (updated_at, id); within
// one Result the keys in the order they appear in its JSON text).
//
// A result key never hides a fixed column and never shares a column key with
// one: a result key equal to a fixed key ("seq", "status", "attempts",
// "error") gets the column key "result.<k>". So that column keys map back to
// result keys unambiguously, a result key that itself starts with "result."
// is prefixed the same way ("result.x" becomes "result.result.x"). Labels are
// the result key itself, except that a key equal to a fixed key, ignoring
// case ("seq", "Status", ...), is labelled "<k> (result)" so that the header
// never shows two columns called "Seq".
//
// # Cells
//
// Cells renders one item: seq and attempts as decimals, the status name,
// LastError, and for result columns the value's text: JSON strings as their
// (unescaped) text, numbers as their literal text ("1.50" stays "1.50", never
// converted to a float), true and false, null and missing keys as "", and
// nested objects and arrays as compact JSON text. A key that appears twice in
// one Result object takes its last value, as encoding/json does.
//
// # CSV
//
// WriteCSV writes RFC 4180 CSV with encoding/csv: comma-separated, fields
// quoted when they hold a comma, a quote or a line break, lines ending in
// "\n" and no byte-order mark. "\r\n" is not used because encoding/csv's
// UseCRLF also rewrites every "\n" inside a quoted value to "\r\n", changing
// the data; Excel, LibreOffice and every CSV reader accept "\n". Every cell,
// the header included, goes through Neutralize so that a spreadsheet never
// runs a value as a formula.
package export
