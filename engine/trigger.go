package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"text/template"
	"time"

	"github.com/robfig/cron/v3"
)

// Events Sluice publishes; event triggers name one of them.
const (
	EventFileIngested = "source.file.ingested"
	EventJobFinished  = "job.finished"
	EventJobFailed    = "job.failed"
	EventItemDead     = "item.dead"
)

// EventNames lists the events triggers can name.
var EventNames = []string{EventFileIngested, EventJobFinished, EventJobFailed, EventItemDead}

var triggerName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// cronParser reads 5-field expressions and descriptors (@daily, @every 1m).
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Schedule is a parsed cron expression in its zone.
type Schedule struct {
	spec cron.Schedule
	loc  *time.Location
}

// ParseSchedule parses a cron expression (5 fields, or @hourly, @daily,
// @every 90s, ...) in an IANA zone. Errors are EINVALID naming "cron" or "tz".
func ParseSchedule(expr, tz string) (*Schedule, error) {
	if tz == "" {
		return nil, FieldErrorf("tz", "required for a schedule (an IANA zone such as America/New_York, or UTC)")
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, FieldErrorf("tz", "%q is not a known IANA time zone", tz)
	}
	if strings.Contains(expr, "TZ=") {
		return nil, FieldErrorf("cron", "give the zone with tz, not inside the expression")
	}
	spec, err := cronParser.Parse(expr)
	if err != nil {
		return nil, FieldErrorf("cron", "%q: %v", expr, err)
	}
	return &Schedule{spec: spec, loc: loc}, nil
}

// Next returns the first due time strictly after t (in UTC). Wall-clock
// times are read in the schedule's zone, so across a DST change:
//   - a time that does not exist that day (02:00–02:59 on the
//     spring-forward day in America/New_York) does not fire that day;
//   - a time that occurs twice on the fall-back day (01:00–01:59 in
//     America/New_York) fires once, at its first occurrence (EDT), when the
//     expression names its hours ("30 1 * * *"); an expression for every
//     hour ("0 * * * *") keeps firing every real hour, both times;
//   - @every schedules count elapsed time and ignore the zone.
func (s *Schedule) Next(t time.Time) time.Time {
	n := s.spec.Next(t.In(s.loc))
	if ss, ok := s.spec.(*cron.SpecSchedule); ok && ss.Hour&allHours != allHours {
		for repeatedWallTime(n) {
			n = s.spec.Next(n)
		}
	}
	return n.UTC()
}

// allHours is the hour field of an expression for every hour.
const allHours = 1<<24 - 1

// repeatedWallTime reports whether the wall-clock time of n (in its zone)
// already occurred earlier that day: n is the second 01:30 of a fall-back.
func repeatedWallTime(n time.Time) bool {
	for _, back := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour} {
		p := n.Add(-back)
		if p.Hour() == n.Hour() && p.Minute() == n.Minute() && p.Second() == n.Second() && p.YearDay() == n.YearDay() {
			return true
		}
	}
	return false
}

// Location is the schedule's zone.
func (s *Schedule) Location() *time.Location { return s.loc }

// Validate checks a trigger that is about to be created and fills its
// defaults; errors are EINVALID naming the field. defs and pipes report
// whether a definition or pipeline exists.
func (t *Trigger) Validate(ctx context.Context, s Store) error {
	if !triggerName.MatchString(t.Name) {
		return FieldErrorf("name", "%q is not a valid trigger name (letters, digits, '.', '_', '-'; at most 64)", t.Name)
	}
	switch t.Kind {
	case TriggerEvent:
		if !contains(EventNames, t.Event) {
			return FieldErrorf("event", "%q is not an event Sluice publishes (one of %s)", t.Event, strings.Join(EventNames, ", "))
		}
		if t.Cron != "" || t.TZ != "" {
			return FieldErrorf("cron", "an event trigger has no schedule")
		}
	case TriggerSchedule:
		if t.Event != "" {
			return FieldErrorf("event", "a schedule trigger has no event")
		}
		if _, err := ParseSchedule(t.Cron, t.TZ); err != nil {
			return err
		}
	default:
		return FieldErrorf("kind", "%q is not event or schedule", t.Kind)
	}
	switch t.Missed {
	case "":
		t.Missed = MissedSkip
	case MissedSkip, MissedOnce:
	default:
		return FieldErrorf("missed", "%q is not skip or once", t.Missed)
	}
	if t.DedupeWindow < 0 {
		return FieldErrorf("dedupeWindow", "must not be negative")
	}
	if (t.Definition == "") == (t.Pipeline == "") {
		return FieldErrorf("definition", "give exactly one of definition and pipeline")
	}
	if len(bytes.TrimSpace(t.Payload)) == 0 {
		t.Payload = json.RawMessage(`{}`)
	}
	var tmpl map[string]any
	if err := json.Unmarshal(t.Payload, &tmpl); err != nil || tmpl == nil {
		return FieldErrorf("payload", "must be a JSON object (its string values are templates)")
	}
	if _, err := renderValue("payload", tmpl, map[string]any{}, true, nil); err != nil {
		return err
	}
	if t.Definition != "" {
		d, err := s.GetDefinition(ctx, t.Definition)
		if IsNotFound(err) {
			return FieldErrorf("definition", "command %q is not defined (see sluice definitions)", t.Definition)
		}
		if err != nil {
			return err
		}
		if !d.IsActive() {
			return FieldErrorf("definition", "command %q is not active", t.Definition)
		}
		return nil
	}
	if _, err := s.GetPipeline(ctx, t.Pipeline); IsNotFound(err) {
		return FieldErrorf("pipeline", "pipeline %q does not exist (see sluice pipelines)", t.Pipeline)
	} else if err != nil {
		return err
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// PipelineName is the pipeline the trigger's jobs run on.
func (t *Trigger) PipelineName() string {
	if t.Definition != "" {
		return CommandPipelinePrefix + t.Definition
	}
	return t.Pipeline
}

// PayloadTemplate is the payload template as stored: {} when empty.
func (t *Trigger) PayloadTemplate() string {
	if len(bytes.TrimSpace(t.Payload)) == 0 {
		return "{}"
	}
	return string(t.Payload)
}

// RenderPayload renders the trigger's payload template with a context.
func (t *Trigger) RenderPayload(data map[string]any) (json.RawMessage, error) {
	return t.renderPayload(data, nil)
}

// templateCache keeps parsed templates by their text.
type templateCache map[string]*template.Template

// renderPayload is RenderPayload with parsed templates kept in cache (nil:
// parse every time).
func (t *Trigger) renderPayload(data map[string]any, cache templateCache) (json.RawMessage, error) {
	var tmpl map[string]any
	if err := json.Unmarshal(t.Payload, &tmpl); err != nil {
		return nil, FieldErrorf("payload", "must be a JSON object")
	}
	v, err := renderValue("payload", tmpl, data, false, cache)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// renderValue renders every string inside v as a text/template (or only
// parses them when parseOnly).
func renderValue(field string, v any, data map[string]any, parseOnly bool, cache templateCache) (any, error) {
	switch x := v.(type) {
	case string:
		if !strings.Contains(x, "{{") {
			return x, nil
		}
		tm := cache[x]
		if tm == nil {
			var err error
			if tm, err = template.New(field).Option("missingkey=error").Parse(x); err != nil {
				return nil, FieldErrorf(field, "%s", oneLine(err.Error()))
			}
			if cache != nil {
				cache[x] = tm
			}
		}
		if parseOnly {
			return x, nil
		}
		var b strings.Builder
		if err := tm.Execute(&b, data); err != nil {
			return nil, FieldErrorf(field, "%s", oneLine(err.Error()))
		}
		return b.String(), nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := renderValue(field+"."+k, e, data, parseOnly, cache)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := renderValue(fmt.Sprintf("%s[%d]", field, i), e, data, parseOnly, cache)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return v, nil
}
