//go:build desktop

package app

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/godbus/dbus/v5"
	"github.com/spf13/cobra"
	"github.com/wailsapp/wails/v2"
	"github.com/wailsapp/wails/v2/pkg/options"
	"github.com/wailsapp/wails/v2/pkg/options/assetserver"
	"github.com/wailsapp/wails/v2/pkg/options/linux"
	wruntime "github.com/wailsapp/wails/v2/pkg/runtime"

	"github.com/sluicehq/sluice/app/api"
	"github.com/sluicehq/sluice/build"
)

// desktopBuilt: this binary has the desktop window.
const desktopBuilt = true

// runDesktop opens the desktop window: the engine, the sources and the
// workers of `sluice --serve` on the same data directory, and the same UI,
// whose /api calls reach the API through Wails' asset server in process.
// No port is opened. The window acts as the local default user.
func runDesktop(cmd *cobra.Command, g *globals, f *serveFlags) error {
	g.defaultLevel = "info"
	ctx, env, err := g.env(cmd)
	if err != nil {
		return err
	}
	defer env.Close()
	defer env.keepHostRates(ctx)()
	d := &Desktop{env: env, log: env.Log.WithGroup("desktop")}
	var (
		mu   sync.Mutex
		wctx context.Context // the Wails runtime's context, once the window is up
	)
	p, err := startParts(ctx, env, f, func(id int64) { go d.jobFinished(context.WithoutCancel(ctx), id) })
	if err != nil {
		return err
	}
	defer p.stop()
	d.ing = p.ing
	u, err := api.DesktopUser(ctx, env.Store)
	if err != nil {
		return err
	}
	d.local = p.srv.LocalHandler(u)
	smoke, err := newDesktopSmoke(env)
	if err != nil {
		return err
	}
	notifier := &dbusNotifier{}
	defer notifier.close()
	d.NotifyFunc = notifier.notify

	srvCtx, stopSrv := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSrv()
	p.srv.Start(srvCtx)
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	runDone := make(chan struct{})
	runErr := make(chan error, 1)
	startWorkers := func() {
		if p.runner == nil {
			close(runDone)
			return
		}
		go func() {
			defer close(runDone)
			if _, err := p.runner.Run(runCtx); err != nil {
				runErr <- fmt.Errorf("workers: %w", err)
			}
		}()
	}

	handler := http.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.local.ServeHTTP(&flushWriter{ResponseWriter: w}, r)
	}))
	if smoke != nil {
		handler = smoke.wrap(handler)
	}
	fmt.Fprintf(g.stdout, "sluice %s desktop window (data in %s)\n", Version, env.Data)
	err = wails.Run(&options.App{
		Title:     "Sluice",
		Width:     1280,
		Height:    820,
		MinWidth:  720,
		MinHeight: 480,
		AssetServer: &assetserver.Options{
			Handler: handler,
		},
		// Files dropped on the window reach Go as paths (OnFileDrop);
		// the page itself cancels the browser's own drop (desktop.ts),
		// so WebKit never navigates to a dropped file (wails issue 3686).
		DragAndDrop: &options.DragAndDrop{EnableFileDrop: true},
		Linux:       &linux.Options{ProgramName: "sluice", Icon: build.Icon, WebviewGpuPolicy: linux.WebviewGpuPolicyNever},
		Bind:        []any{d},
		OnStartup: func(c context.Context) {
			mu.Lock()
			wctx = c
			mu.Unlock()
			d.SaveDialogFunc = func(suggested, ext string) (string, error) {
				return wruntime.SaveFileDialog(c, wruntime.SaveDialogOptions{
					Title: "Save export", DefaultFilename: suggested, CanCreateDirectories: true,
					Filters: []wruntime.FileFilter{{DisplayName: strings.ToUpper(ext) + " files", Pattern: "*." + ext}},
				})
			}
			d.EmitFunc = func(name string, data any) { wruntime.EventsEmit(c, name, data) }
			wruntime.OnFileDrop(c, func(_, _ int, paths []string) {
				go func() {
					outs := d.dropped(ctx, paths)
					if smoke != nil {
						smoke.droppedDone(outs)
					}
				}()
			})
			if smoke != nil {
				smoke.start(c, d)
			}
			startWorkers()
			// SIGINT or SIGTERM closes the window as its close button does.
			go func() {
				select {
				case <-runCtx.Done():
					if ctx.Err() != nil {
						wruntime.Quit(c)
					}
				case err := <-runErr:
					env.Log.Error("the workers stopped", "err", err)
					wruntime.Quit(c)
				}
			}()
		},
	})
	mu.Lock()
	started := wctx != nil
	mu.Unlock()
	env.Log.Info("window closed: no new claims; running items finish")
	p.srv.Close()
	stopSrv()
	if !started {
		startWorkers() // nothing ran: let the wait below return
	}
	stopRun()
	<-runDone
	if err != nil {
		return fmt.Errorf("desktop window: %w", err)
	}
	if smoke != nil {
		return smoke.result()
	}
	return nil
}

// flushWriter gives Wails' response writer the Flush the event stream
// asks for: on Linux it writes straight into the pipe WebKit reads, so
// there is nothing to flush, but a write that failed (the page went away)
// is reported so the stream ends.
type flushWriter struct {
	http.ResponseWriter
	err error
}

func (w *flushWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	if err != nil && w.err == nil {
		w.err = err
	}
	return n, err
}

func (w *flushWriter) Flush() error {
	if f, ok := w.ResponseWriter.(interface{ FlushError() error }); ok {
		return f.FlushError()
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
	return w.err
}

// FlushError is what http.ResponseController calls.
func (w *flushWriter) FlushError() error { return w.Flush() }

// dbusNotifier shows notifications through the desktop's notification
// service (org.freedesktop.Notifications on the session bus).
type dbusNotifier struct {
	mu   sync.Mutex
	conn *dbus.Conn
}

func (n *dbusNotifier) notify(title, body string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.conn == nil {
		conn, err := dbus.ConnectSessionBus()
		if err != nil {
			return fmt.Errorf("no session bus: %w", err)
		}
		n.conn = conn
	}
	obj := n.conn.Object("org.freedesktop.Notifications", "/org/freedesktop/Notifications")
	call := obj.Call("org.freedesktop.Notifications.Notify", 0,
		"Sluice", uint32(0), "sluice", title, body, []string{}, map[string]dbus.Variant{}, int32(-1))
	if call.Err != nil {
		return fmt.Errorf("notify: %w", call.Err)
	}
	return nil
}

func (n *dbusNotifier) close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.conn != nil {
		_ = n.conn.Close()
	}
}
