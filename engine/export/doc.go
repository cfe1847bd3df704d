// Package export turns a job's items into a table: the grid in the UI and the
// files people download (CSV and XLSX) show exactly the same columns, rows,
// order and cell text, because the grid reads Store.ListItems and Columns
// and renders with Cells, and the files read the same items in the same
// order (Store.ScanItems) and render them the same way. Write is the entry
// point for any format.
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
//
// # XLSX
//
// WriteXLSX writes the same table as a workbook with excelize's
// StreamWriter: a bold, frozen header row, then the rows on a sheet
// "Items" (a job larger than a sheet's 1,048,575 rows continues on "Items
// 2", ...). A cell whose text is a plain decimal number is a number cell:
// JSON's number syntax (an optional minus, no leading zeros, an optional
// fraction and exponent) with at most 15 significant digits and a value a
// spreadsheet can hold, so that it reads back as the same value; seq and
// attempts are numbers that way too. Any other cell is text, neutralised as
// in CSV ("007", "+1" and 16-digit identifiers stay text), and an empty
// cell is left out. Headers are always text. Two differences from the CSV
// file are the format's own: XML cannot hold control characters other than
// tab, line feed and carriage return (they become U+FFFD), and a cell holds
// at most 32,767 characters (longer text is cut).
//
// # One pass
//
// The files are written from one pass over the items, so the header and
// the rows come from one snapshot of the store even while the job runs. The
// header is known only after the last item, so the rows wait in a spool
// (memory up to 8 MiB, then a temporary file in os.TempDir) in the order
// read; a column only ever appears after the rows that lack it, so a row
// is its first cells and the rest are empty. Nothing is written to the
// caller's writer before the pass succeeds. The store is read on its own
// goroutine, a few batches ahead of the rendering.
package export
