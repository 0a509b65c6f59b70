package errtext

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/hashicorp/go-multierror"
)

func TestOneLine(t *testing.T) {
	one := multierror.Append(nil, fmt.Errorf("Failed to join 127.0.0.1:7946: dial tcp 127.0.0.1:7946: connect: connection refused"))
	two := multierror.Append(nil, errors.New("a"), io.EOF)
	for _, tt := range []struct {
		err  error
		want string
	}{
		{one, "Failed to join 127.0.0.1:7946: dial tcp 127.0.0.1:7946: connect: connection refused"},
		{two, "a; EOF"},
		{fmt.Errorf("join: %w", two), "join: a; EOF"},
		{errors.New("plain"), "plain"},
		{errors.New("line one\nline two"), "line one line two"},
	} {
		got := OneLine(tt.err)
		if got.Error() != tt.want {
			t.Errorf("OneLine(%q) = %q, want %q", tt.err.Error(), got.Error(), tt.want)
		}
		if !errors.Is(got, tt.err) {
			t.Errorf("OneLine(%q) does not unwrap to the original", tt.err.Error())
		}
	}
	if !errors.Is(OneLine(two), io.EOF) {
		t.Error("a flattened multi-error lost its items for errors.Is")
	}
	if OneLine(nil) != nil {
		t.Error("OneLine(nil) != nil")
	}
}
