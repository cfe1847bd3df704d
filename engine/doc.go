// Package engine is the domain of Sluice: jobs, items and their state
// machines, pipelines and processors, the Store interface that persistence
// must provide, persist-first ingest, the claim/complete loop with its
// adaptive controllers, and export.
//
// The engine imports no storage driver and no transport. Storage packages
// implement Store; the app package wires everything together.
package engine
