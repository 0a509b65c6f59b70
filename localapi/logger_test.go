package localapi

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/conclave-agent/conclave/api"
)

// A request the backend fails with a server error reaches Options.Logger
// as a warning naming the path and the error; a client error (4xx) does
// not.
func TestServerErrorsAreLogged(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	ts := startServer(t, nil, Options{Logger: zap.New(core)})
	ts.be.set(func(b *fakeBackend) { b.consistentErr = errors.New("disk on fire") })
	ts.expectError(t, http.MethodGet, api.PathStatus+"?"+api.ParamConsistent+"=true", http.StatusInternalServerError)
	warns := logs.FilterLevelExact(zapcore.WarnLevel).FilterMessage("localapi request failed").All()
	if len(warns) != 1 {
		t.Fatalf("%d warnings for one failed request, want 1 (all: %v)", len(warns), logs.All())
	}
	f := warns[0].ContextMap()
	if f["path"] != api.PathStatus || f["code"] != int64(http.StatusInternalServerError) || !strings.Contains(fmt.Sprint(f["error"]), "disk on fire") {
		t.Fatalf("warning fields %v", f)
	}
	ts.expectError(t, http.MethodPost, api.PathStatus, http.StatusMethodNotAllowed)
	if n := logs.FilterLevelExact(zapcore.WarnLevel).Len(); n != 1 {
		t.Fatalf("%d warnings after a client error, want still 1", n)
	}
}
