package testenv

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// AuditWrite is one request the API server recorded: a write (Writes), or any request of a
// ServiceAccount (Refused).
type AuditWrite struct {
	Verb      string
	User      string
	UserAgent string
	Resource  string // e.g. "deployments", "clustercsidrivers/status"
	Namespace string
	Name      string
	Code      int // the response code: a refused write is recorded too
	Time      time.Time
}

func (w AuditWrite) String() string {
	where := w.Name
	if w.Namespace != "" {
		where = w.Namespace + "/" + w.Name
	}
	return fmt.Sprintf("%s %s %s by %s (%s): %d", w.Verb, w.Resource, where, w.User, w.UserAgent, w.Code)
}

// writeVerbs are the verbs the audit policy records for every user.
var writeVerbs = map[string]bool{"create": true, "update": true, "patch": true, "delete": true, "deletecollection": true}

// Writes returns the writes in the audit log for which keep is true, in order.
func (s *APIServer) Writes(keep func(AuditWrite) bool) ([]AuditWrite, error) {
	return s.audited(func(w AuditWrite) bool { return writeVerbs[w.Verb] && (keep == nil || keep(w)) })
}

// Refused returns the requests of ServiceAccounts the API server answered 403 Forbidden, in
// order: what RBAC denied a pod (the user is system:serviceaccount:NAMESPACE:NAME).
func (s *APIServer) Refused() ([]AuditWrite, error) {
	return s.audited(func(w AuditWrite) bool {
		return w.Code == 403 && strings.HasPrefix(w.User, "system:serviceaccount:")
	})
}

// ServiceAccountRequests returns every recorded request of the ServiceAccount namespace/name,
// in order: that a pod used its own identity, and how much.
func (s *APIServer) ServiceAccountRequests(namespace, name string) ([]AuditWrite, error) {
	user := "system:serviceaccount:" + namespace + ":" + name
	return s.audited(func(w AuditWrite) bool { return w.User == user })
}

func (s *APIServer) audited(keep func(AuditWrite) bool) ([]AuditWrite, error) {
	f, err := os.Open(s.AuditLog)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []AuditWrite
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			Verb string `json:"verb"`
			User struct {
				Username string `json:"username"`
			} `json:"user"`
			UserAgent  string `json:"userAgent"`
			RequestURI string `json:"requestURI"`
			ObjectRef  *struct {
				Resource    string `json:"resource"`
				Subresource string `json:"subresource"`
				Namespace   string `json:"namespace"`
				Name        string `json:"name"`
			} `json:"objectRef"`
			ResponseStatus *struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
			StageTimestamp time.Time `json:"stageTimestamp"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("audit log %s: %w", s.AuditLog, err)
		}
		// A dry run changes nothing: not a write, and no request that was refused for real.
		if strings.Contains(ev.RequestURI, "dryRun=") {
			continue
		}
		w := AuditWrite{Verb: ev.Verb, User: ev.User.Username, UserAgent: ev.UserAgent, Time: ev.StageTimestamp}
		if r := ev.ObjectRef; r != nil {
			w.Resource, w.Namespace, w.Name = r.Resource, r.Namespace, r.Name
			if r.Subresource != "" {
				w.Resource += "/" + r.Subresource
			}
		}
		if ev.ResponseStatus != nil {
			w.Code = ev.ResponseStatus.Code
		}
		if keep(w) {
			out = append(out, w)
		}
	}
	return out, sc.Err()
}

// ByUserAgent keeps the writes whose user agent starts with prefix (client-go sends
// "<binary>/<version> ...", e.g. "manila-setup") or ends with "/"+prefix (rest.AddUserAgent
// appends a component's name, as the operator's clients do when it runs inside a test binary).
func ByUserAgent(prefix string) func(AuditWrite) bool {
	return func(w AuditWrite) bool {
		return strings.HasPrefix(w.UserAgent, prefix) || strings.HasSuffix(w.UserAgent, "/"+prefix)
	}
}
