package app

import (
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sluicehq/sluice/engine"
)

// ImagePipeline is the built-in pipeline image jobs use by default.
const ImagePipeline = "image"

// sniffImage reports the image media type of a file ("" when it is not an
// image), from its first bytes, not its name.
func sniffImage(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	head := make([]byte, 512)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return "", err
	}
	mt := http.DetectContentType(head[:n])
	if strings.HasPrefix(mt, "image/") {
		return mt, nil
	}
	return "", nil
}

// splitInputs sorts the ingest arguments: tabular files (a job each) and
// images (one job for all), walking directories for images. Hidden files
// and folders are skipped; links are not followed out of a folder.
func splitInputs(args []string) (tabular []string, images []engine.ImageFile, err error) {
	addImage := func(path string, size int64, mt string) error {
		abs, err := filepath.Abs(path)
		if err != nil {
			return err
		}
		images = append(images, engine.ImageFile{Path: abs, Name: filepath.Base(path), Size: size, MediaType: mt})
		return nil
	}
	for _, arg := range args {
		st, err := os.Stat(arg)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", arg, err)
		}
		if !st.IsDir() {
			mt, err := sniffImage(arg)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", arg, err)
			}
			if mt == "" {
				tabular = append(tabular, arg)
				continue
			}
			if err := addImage(arg, st.Size(), mt); err != nil {
				return nil, nil, err
			}
			continue
		}
		found := 0
		err = filepath.WalkDir(arg, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if path != arg && strings.HasPrefix(d.Name(), ".") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() {
				return nil
			}
			mt, err := sniffImage(path)
			if err != nil || mt == "" {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			found++
			return addImage(path, info.Size(), mt)
		})
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", arg, err)
		}
		if found == 0 {
			return nil, nil, usagef("%s is a directory with no image files", arg)
		}
	}
	sort.SliceStable(images, func(i, j int) bool { return images[i].Path < images[j].Path })
	return tabular, images, nil
}
