package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/conclave-agent/conclave/api"
)

func runMan(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("man", stderr)
	dir := fs.String("dir", "", "directory to write the pages into (created if missing)")
	words, code, ok := parseArgs(fs, args, stdout)
	if !ok {
		return code
	}
	if !expectNoWords(fs, words) {
		return 2
	}
	if *dir == "" {
		fmt.Fprintf(stderr, "agent man: -dir is required: the directory to write agent.1 and agent-NAME.1 into\n")
		return 2
	}
	pages := manPages(readVersion().Version)
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		fmt.Fprintf(stderr, "agent man: %v\n", err)
		return 1
	}
	for name, text := range pages {
		if err := os.WriteFile(filepath.Join(*dir, name), []byte(text), 0o644); err != nil {
			fmt.Fprintf(stderr, "agent man: %v\n", err)
			return 1
		}
	}
	fmt.Fprintf(stdout, "wrote %d man pages to %s\n", len(pages), *dir)
	return 0
}

// roff escapes text for a man page line: backslashes, hyphens (which roff
// would render as typographic hyphens, breaking copied flags), characters
// beyond ASCII (as \[uXXXX]) and a leading dot or quote, which roff would
// read as a request.
func roff(s string) string {
	s = strings.NewReplacer(`\`, `\e`, "-", `\-`).Replace(s)
	var esc strings.Builder
	for _, r := range s {
		if r > 0x7e {
			fmt.Fprintf(&esc, `\[u%04X]`, r)
		} else {
			esc.WriteRune(r)
		}
	}
	s = esc.String()
	var lines []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			l = `\&` + l
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n")
}

// manPages renders agent.1 and agent-NAME.1 for every command of the
// table, by file name.
func manPages(version string) map[string]string {
	header := func(b *strings.Builder, title string) {
		fmt.Fprintf(b, ".TH %s 1 \"\" \"conclave %s\" \"conclave manual\"\n", strings.ToUpper(title), roff(version))
	}
	pages := map[string]string{}
	var top strings.Builder
	header(&top, "agent")
	top.WriteString(".SH NAME\nagent \\- the conclave leader\\-election agent and its client\n")
	top.WriteString(".SH SYNOPSIS\n.B agent\n.I command\n[flags] [words]\n")
	top.WriteString(".SH DESCRIPTION\nOne agent runs on every host. Agents find each other by gossip, suspect\nfailures with a phi\\-accrual detector and elect one leader, which local\nprocesses learn with its epoch (the fencing token) over a Unix socket.\n")
	top.WriteString(".SH COMMANDS\n")
	var seeAlso []string
	for _, c := range commands() {
		fmt.Fprintf(&top, ".TP\n.BR agent\\-%s (1)\n%s\n", roff(c.name), roff(c.summary))
		seeAlso = append(seeAlso, fmt.Sprintf(".BR agent\\-%s (1)", roff(c.name)))
		pages["agent-"+c.name+".1"] = commandPage(c, version, header)
	}
	fmt.Fprintf(&top, ".SH ENVIRONMENT\n.TP\n.B %s\nThe socket client commands use when \\-socket is not given (default %s).\n", api.EnvSocket, roff(api.DefaultSocket))
	top.WriteString(".SH FILES\n.TP\n.I /etc/conclave/agent.toml\nThe configuration the packaged systemd unit runs with.\n")
	top.WriteString(".SH SEE ALSO\n" + strings.Join(seeAlso, ",\n") + "\n")
	pages["agent.1"] = top.String()
	return pages
}

func commandPage(c command, version string, header func(*strings.Builder, string)) string {
	var b strings.Builder
	header(&b, "agent-"+c.name)
	fmt.Fprintf(&b, ".SH NAME\nagent\\-%s \\- %s\n.SH SYNOPSIS\n", roff(c.name), roff(c.summary))
	for i, u := range c.usage {
		if i > 0 {
			b.WriteString(".br\n")
		}
		fmt.Fprintf(&b, ".B agent %s\n", roff(c.name))
		if u = strings.TrimSpace(u); u != "" {
			b.WriteString(roff(u) + "\n")
		}
	}
	if c.about != "" {
		fmt.Fprintf(&b, ".SH DESCRIPTION\n%s\n", roff(strings.ReplaceAll(c.about, "\n", " ")))
	}
	if flags := commandFlags(c); len(flags) > 0 {
		b.WriteString(".SH OPTIONS\n")
		for _, f := range flags {
			fmt.Fprintf(&b, ".TP\n.B \\-%s", roff(f.name))
			if f.arg != "" {
				fmt.Fprintf(&b, " \" \"\n.I %s", roff(f.arg))
			}
			b.WriteString("\n" + roff(f.usage))
			if f.def != "" {
				fmt.Fprintf(&b, " (default %s)", roff(f.def))
			}
			b.WriteString("\n")
		}
	}
	if len(c.example) > 0 {
		b.WriteString(".SH EXAMPLE\n.nf\n")
		for _, e := range c.example {
			b.WriteString(roff(e) + "\n")
		}
		b.WriteString(".fi\n")
	}
	b.WriteString(".SH SEE ALSO\n.BR agent (1)\n")
	return b.String()
}
