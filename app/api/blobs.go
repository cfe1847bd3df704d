package api

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/sluicehq/sluice/engine"
)

// itemThumbnail serves the thumbnail an image stage stored for the item.
func (s *Server) itemThumbnail(w http.ResponseWriter, r *http.Request, c *caller) error {
	return s.serveItemBlob(w, r, c, "thumbnail", func(it *engine.Item) string {
		var res struct {
			Thumbnail string `json:"thumbnail"`
		}
		_ = json.Unmarshal(it.Result, &res)
		return res.Thumbnail
	})
}

// itemImage serves the stored copy of an image item's file.
func (s *Server) itemImage(w http.ResponseWriter, r *http.Request, c *caller) error {
	return s.serveItemBlob(w, r, c, "image", func(it *engine.Item) string {
		var in struct {
			Blob string `json:"blob"`
		}
		_ = json.Unmarshal(it.Input, &in)
		return in.Blob
	})
}

// serveItemBlob streams the blob keyOf names for the caller's item. Only
// keys under the item's own job are served, whatever its result says.
func (s *Server) serveItemBlob(w http.ResponseWriter, r *http.Request, c *caller, what string, keyOf func(*engine.Item) string) error {
	it, err := s.itemFromPath(r, c)
	if err != nil {
		return err
	}
	id := it.ID
	key := keyOf(it)
	if key == "" || !strings.HasPrefix(key, engine.JobBlobKey(it.JobID, "")) {
		return engine.Errorf(engine.ENOTFOUND, "item %d has no stored %s", id, what)
	}
	b, err := s.store.OpenBlob(r.Context(), key)
	if engine.IsNotFound(err) {
		return engine.Errorf(engine.ENOTFOUND, "the %s of item %d is no longer stored", what, id)
	}
	if err != nil {
		return err
	}
	defer b.Close()
	st, err := s.store.StatBlob(r.Context(), key)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", cmp.Or(st.MediaType, "application/octet-stream"))
	w.Header().Set("Content-Length", fmt.Sprint(b.Size()))
	w.Header().Set("Cache-Control", "private, max-age=3600")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if _, err := io.Copy(w, b); err != nil && r.Context().Err() == nil {
		// The status is sent: all that is left is to say so in the log.
		s.log.Warn("could not send a stored file", "key", key, "err", err)
	}
	return nil
}
