package api

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xuri/excelize/v2"

	"github.com/sluicehq/sluice/engine"
)

// gridJob makes a job with an item in every status and results that
// exercise the export: formulas, numbers, unicode, nested values, a key
// named like a fixed column, and keys that appear late.
func (h *harness) gridJob() *engine.Job {
	t := h.t
	rows := make([]json.RawMessage, 9)
	for i := range rows {
		rows[i] = json.RawMessage(fmt.Sprintf(`{"sku":"S%d"}`, i+1))
	}
	j, err := h.ing.Enqueue(t.Context(), engine.EnqueueRequest{UserID: h.owner.ID, Pipeline: engine.DefaultPipeline, Name: "grid", Source: "api", Rows: rows})
	require.NoError(t, err)
	now := time.Now()
	items, err := h.st.ClaimItems(t.Context(), &engine.ClaimItemsParams{WorkerID: "w", Limit: 8, LeaseFor: time.Hour, Now: now})
	require.NoError(t, err)
	require.Len(t, items, 8)
	results := []string{
		`{"name":"=HYPERLINK(\"http://x\")","price":12.50,"qty":3,"note":"-not a number"}`,
		`{"name":"Grüße, \"quoted\"\nline","price":-4,"qty":0,"tags":["a","b"]}`,
		`{"name":"+1 555","status":"fine","nested":{"k": [1, 2]},"late":true}`,
		`{"name":"@user","price":"0012","empty":"","nil":null}`,
	}
	var outs []engine.Outcome
	for i, it := range items[:7] {
		o := engine.Outcome{ItemID: it.ID, JobID: it.JobID, Attempt: it.Attempts, Stage: it.Stage, NextStage: it.Stage, StartedAt: now, Duration: time.Millisecond}
		switch i {
		case 0, 1, 2, 3:
			o.Status, o.Result = engine.ItemDone, json.RawMessage(results[i])
		case 4:
			o.Status, o.ErrorClass, o.Error = engine.ItemError, engine.ClassPermanent, "=cmd|' /C calc'!A0 rejected"
		case 5:
			o.Status, o.ErrorClass, o.Error = engine.ItemNotFound, engine.ClassNotFound, "no match"
		case 6:
			o.Status, o.Error = engine.ItemSkipped, "skipped by rule"
		}
		outs = append(outs, o)
	}
	_, err = h.st.CompleteItems(t.Context(), &engine.CompleteItemsParams{WorkerID: "w", Outcomes: outs, Now: now})
	require.NoError(t, err)
	// items[7] stays PROCESSING, the ninth PENDING.
	return j
}

// cellFromAPI renders what the items API says about one column of an item,
// independently of the export code: the cell a spreadsheet should show.
func cellFromAPI(t *testing.T, it map[string]json.RawMessage, key string) string {
	str := func(raw json.RawMessage) string {
		if len(raw) == 0 || string(raw) == "null" {
			return ""
		}
		var s string
		if raw[0] == '"' {
			require.NoError(t, json.Unmarshal(raw, &s))
			return s
		}
		var buf bytes.Buffer
		require.NoError(t, json.Compact(&buf, raw))
		return buf.String()
	}
	switch key {
	case "seq", "status", "attempts":
		return str(it[key])
	case "error":
		return str(it["lastError"])
	}
	var result map[string]json.RawMessage
	if r := it["result"]; len(r) > 0 && string(r) != "null" {
		require.NoError(t, json.Unmarshal(r, &result))
	}
	return str(result[strings.TrimPrefix(key, "result.")])
}

// spreadsheetSafe is the expected neutralisation: text that a spreadsheet
// would run as a formula starts with a quote; plain numbers stay.
func spreadsheetSafe(s string) string {
	if s == "" || !strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return s
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil && !strings.ContainsAny(s, "xXnNiI") {
		return s
	}
	return "'" + s
}

// gridRows reads every page of /items under a filter as raw objects.
func (h *harness) gridRows(jobID int64, statuses string) []map[string]json.RawMessage {
	var rows []map[string]json.RawMessage
	after := ""
	for {
		resp, body := h.get(fmt.Sprintf("/api/jobs/%d/items?pageSize=2&statuses=%s&after=%s", jobID, statuses, after), h.ownerTok)
		require.Equal(h.t, http.StatusOK, resp.StatusCode, "%s", body)
		var page struct {
			Items []map[string]json.RawMessage `json:"items"`
			Next  *string                      `json:"next"`
		}
		require.NoError(h.t, json.Unmarshal(body, &page))
		rows = append(rows, page.Items...)
		if page.Next == nil {
			return rows
		}
		after = *page.Next
	}
}

// TestExportParity: the CSV and XLSX exports hold exactly the grid: the
// columns of /columns (labels as headers), the rows of /items in their
// order under the same filter, and the same cell values, neutralised. (The
// export package's own tests also read the XLSX with openpyxl.)
func TestExportParity(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	j := h.gridJob()
	for _, statuses := range []string{"", "DONE,ERROR", "PENDING,PROCESSING,SKIPPED,NOT_FOUND"} {
		resp, body := h.get(fmt.Sprintf("/api/jobs/%d/columns?statuses=%s", j.ID, statuses), h.ownerTok)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		cols := decode[struct {
			Columns []columnOut `json:"columns"`
		}](t, body).Columns
		rows := h.gridRows(j.ID, statuses)
		if statuses == "" {
			require.Len(t, rows, 9, "every status is in the job")
			var keys []string
			for _, c := range cols {
				keys = append(keys, c.Key)
			}
			require.Contains(t, keys, "result.status", "a result key named like a fixed column gets its own column")
			require.Contains(t, keys, "late")
		}
		resp, body = h.get(fmt.Sprintf("/api/jobs/%d/export?format=csv&statuses=%s", j.ID, statuses), h.ownerTok)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		recs, err := csv.NewReader(bytes.NewReader(body)).ReadAll()
		require.NoError(t, err)
		require.Len(t, recs, len(rows)+1, "statuses=%q", statuses)
		for i, c := range cols {
			require.Equal(t, c.Label, recs[0][i])
		}
		for r, it := range rows {
			for i, c := range cols {
				want := spreadsheetSafe(cellFromAPI(t, it, c.Key))
				require.Equal(t, want, recs[r+1][i], "statuses=%q row %d column %s", statuses, r+1, c.Key)
			}
		}

		// The XLSX export holds the same cells; plain numbers are number
		// cells (of the same value), everything else text.
		resp, body = h.get(fmt.Sprintf("/api/jobs/%d/export?format=xlsx&statuses=%s", j.ID, statuses), h.ownerTok)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		require.Equal(t, "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", resp.Header.Get("Content-Type"))
		f, err := excelize.OpenReader(bytes.NewReader(body))
		require.NoError(t, err)
		sheet := f.GetSheetList()[0]
		xrows, err := f.GetRows(sheet, excelize.Options{RawCellValue: true})
		require.NoError(t, err)
		require.Len(t, xrows, len(rows)+1)
		for i, c := range cols {
			require.Equal(t, c.Label, xrows[0][i])
		}
		for r, it := range rows {
			for i, c := range cols {
				want := spreadsheetSafe(cellFromAPI(t, it, c.Key))
				got := ""
				if i < len(xrows[r+1]) {
					got = xrows[r+1][i]
				}
				ref, _ := excelize.CoordinatesToCellName(i+1, r+2)
				typ, err := f.GetCellType(sheet, ref)
				require.NoError(t, err)
				where := fmt.Sprintf("xlsx statuses=%q row %d column %s", statuses, r+1, c.Key)
				if wn, err := strconv.ParseFloat(want, 64); err == nil && typ != excelize.CellTypeInlineString && typ != excelize.CellTypeSharedString {
					gn, err := strconv.ParseFloat(got, 64)
					require.NoError(t, err, where)
					require.Equal(t, wn, gn, where)
					continue
				}
				require.Equal(t, want, got, where)
			}
		}
		require.NoError(t, f.Close())
	}
}
