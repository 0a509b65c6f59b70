package api

// Sessions: an election configured with candidacy = "session" has the
// agent stand only while a local process holds a session on it
// (docs/elections.md, "Sessions"), as a Consul lock holds a session and an
// etcd campaign a lease. The session lives as long as the campaign's
// connection stays open and, with session_ttl, as long as its holder
// checks in.

const (
	// PathCampaign: POST → a held-open NDJSON stream of CampaignLine. The
	// first line names the session (Session, TTLMS, Election); then come
	// the election's status lines, as PathWatch sends them, while the
	// session lives; the last line says why it ended (Ended, Error) and
	// the connection closes. Closing the connection closes the session.
	// 409 with Error when the election's candidacy is not "session" or
	// this agent can never lead it (majority: not a voter); 503 when
	// MaxSessions are open or the agent serves its most streams; 403 like
	// PathResign.
	PathCampaign = "/v1/campaign"
	// PathHeartbeat: POST with ParamSession → 200 Heartbeat: the session
	// lives another session_ttl. 410 Gone with Error when the session
	// ended (closed, expired, or the agent restarted): its holder must
	// campaign again. 403 like PathResign.
	PathHeartbeat = "/v1/heartbeat"
	// ParamSession names the session a PathHeartbeat checks in for, as
	// the first line of PathCampaign gave it.
	ParamSession = "session"
)

// Why a session ended, the values of CampaignLine.Ended.
const (
	// SessionClosed: the holder closed it, or the agent ended the stream
	// (its watcher fell behind); nothing holds the candidacy any more.
	SessionClosed = "closed"
	// SessionExpired: the holder did not check in within session_ttl.
	SessionExpired = "expired"
	// SessionStopped: the agent is stopping.
	SessionStopped = "stopped"
)

// CampaignLine decodes one line of a PathCampaign stream. The first line
// has Session set; the last has Ended set (and Error saying why in words);
// every line between is a Status of the election, as on PathWatch.
type CampaignLine struct {
	Status
	// Session is the session's id, for PathHeartbeat; first line only.
	Session string `json:"session,omitempty"`
	// TTLMS is the election's session_ttl in milliseconds (0: no check-in
	// is needed); first line only.
	TTLMS int64 `json:"ttl_ms,omitempty"`
	// Ended is why the session ended (SessionClosed, SessionExpired,
	// SessionStopped); last line only.
	Ended string `json:"ended,omitempty"`
	// Error says in words why the session ended; last line only.
	Error string `json:"error,omitempty"`
}

// Heartbeat is the answer to a PathHeartbeat.
type Heartbeat struct {
	// Session is the session that checked in.
	Session string `json:"session"`
}
