package console

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
)

// contentSecurityPolicy allows the console's own script and style files and
// nothing else: no inline script or style, no plugins, no framing, no
// foreign form targets.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

func setSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	// Pages show payloads: keep them out of shared and disk caches.
	h.Set("Cache-Control", "no-store")
}

//go:embed static
var staticFS embed.FS

// asset is one embedded static file.
type asset struct {
	body        []byte
	etag        string
	contentType string
}

var assets = loadAssets()

func loadAssets() map[string]asset {
	out := map[string]asset{}
	types := map[string]string{".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".svg": "image/svg+xml"}
	entries, err := fs.ReadDir(staticFS, "static")
	if err != nil {
		panic(err) // embedded at build time
	}
	for _, e := range entries {
		b, err := staticFS.ReadFile("static/" + e.Name())
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(b)
		out[e.Name()] = asset{body: b, etag: hex.EncodeToString(sum[:8]), contentType: types[path.Ext(e.Name())]}
	}
	return out
}

// static serves an embedded asset. Assets are public (no authentication), so
// a refusal page is styled too. Their URLs carry the content hash, so
// browsers may keep them.
func (h *handler) static(w http.ResponseWriter, r *http.Request) {
	a, ok := assets[r.PathValue("file")]
	if !ok || a.contentType == "" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", a.contentType)
	w.Header().Set("ETag", `"`+a.etag+`"`)
	w.Header().Set("Cache-Control", "public, max-age=86400")
	if r.Header.Get("If-None-Match") == `"`+a.etag+`"` {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Write(a.body)
}

// assetURL is the versioned URL of an asset.
func (h *handler) assetURL(name string) string {
	return h.cfg.Prefix + "/static/" + name + "?v=" + assets[name].etag
}
