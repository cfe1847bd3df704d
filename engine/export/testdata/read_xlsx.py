"""Print an XLSX workbook as JSON, as openpyxl reads it.

Usage: python3 read_xlsx.py FILE

Output: {"sheets": [{"name": NAME, "rows": [[CELL, ...], ...]}, ...]} where
a CELL is null (empty), {"n": NUMBER} or {"s": TEXT}; any other kind of
value is {"other": its repr}, which the Go test reports as wrong.
"""
import json
import sys

import openpyxl


def cell(value):
    if value is None:
        return None
    if isinstance(value, bool):
        return {"other": repr(value)}
    if isinstance(value, (int, float)):
        return {"n": value}
    if isinstance(value, str):
        return {"s": value}
    return {"other": repr(value)}


def main(path):
    wb = openpyxl.load_workbook(path, read_only=True, data_only=False)
    sheets = []
    for ws in wb.worksheets:
        rows = [[cell(v) for v in row] for row in ws.iter_rows(values_only=True)]
        sheets.append({"name": ws.title, "rows": rows})
    wb.close()
    json.dump({"sheets": sheets}, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main(sys.argv[1])
