package config

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// EmbeddedDefaults is the configuration `gregor` runs with when it is given
// no properties file: one combined broker+controller node on localhost,
// data in ./gregor-data, internal topics with replication factor 1. A
// properties file replaces these entirely, as server.properties does for
// Kafka; --override values go on top of either.
func EmbeddedDefaults() map[string]string {
	return map[string]string{
		"node.id":                             "1",
		"process.roles":                       "broker,controller",
		"listeners":                           "PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093",
		"controller.listener.names":           "CONTROLLER",
		"controller.quorum.bootstrap.servers": "localhost:9093",
		"inter.broker.listener.name":          "PLAINTEXT",
		"log.dirs":                            "./gregor-data",
		// Kafka's default map plus the controller listener, as in Kafka's
		// sample server.properties.
		"listener.security.protocol.map":                   "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
		"offsets.topic.replication.factor":                 "1",
		"transaction.state.log.replication.factor":         "1",
		"transaction.state.log.min.isr":                    "1",
		"share.coordinator.state.topic.replication.factor": "1",
		"share.coordinator.state.topic.min.isr":            "1",
		// __remote_log_metadata, when tiered storage is turned on.
		"rlmm.config.remote.log.metadata.topic.replication.factor": "1",
	}
}

// Listener is one parsed entry of listeners or advertised.listeners.
type Listener struct {
	// Name is the normalised (upper-case) listener name.
	Name string
	// Host is empty for the wildcard address (":9092").
	Host             string
	Port             int32
	SecurityProtocol string // PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
}

// Broker is a loaded, validated broker configuration. The typed fields are
// the ones Gregor uses; every other key is reachable through Value and the
// typed getters, which return the configured value or Kafka's default.
type Broker struct {
	NodeID       int32
	IsBroker     bool
	IsController bool

	Listeners []Listener
	// AdvertisedListeners are the broker listeners published to clients
	// (advertised.listeners, or listeners), controller listeners excluded.
	AdvertisedListeners []Listener
	// AdvertisedControllerListeners are the controller listeners published
	// to the quorum.
	AdvertisedControllerListeners []Listener
	// ListenerSecurityProtocolMap maps normalised listener names to
	// security protocols, with Kafka's implicit PLAINTEXT entries for
	// controller listeners when the key was not set.
	ListenerSecurityProtocolMap      map[string]string
	ControllerListenerNames          []string
	InterBrokerListenerName          string
	ControllerQuorumBootstrapServers []string
	ControllerQuorumVoters           []Voter

	LogDirs        []string
	MetadataLogDir string

	NumPartitions            int32
	DefaultReplicationFactor int32
	MinInsyncReplicas        int32
	AutoCreateTopicsEnable   bool
	DeleteTopicEnable        bool
	MessageMaxBytes          int32
	SocketRequestMaxBytes    int32
	NumNetworkThreads        int32
	NumIOThreads             int32
	CompressionType          string

	// Connection limits and idle expiry.
	ConnectionsMaxIdleMs     int64 // -1: never
	SocketSendBufferBytes    int32 // socket.send.buffer.bytes; -1: OS default
	SocketReceiveBufferBytes int32 // socket.receive.buffer.bytes; -1: OS default
	QueuedMaxRequestBytes    int64 // -1: no limit
	MaxConnections           int32
	MaxConnectionsPerIP      int32
	// MaxConnectionsPerIPOverrides is max.connections.per.ip.overrides
	// as host (name or address) to limit.
	MaxConnectionsPerIPOverrides map[string]int32
	// ListenerMaxConnections holds listener.name.<l>.max.connections by
	// upper-case listener name, for the listeners that set one.
	ListenerMaxConnections map[string]int32
	// MaxConnectionCreationRate is max.connection.creation.rate;
	// ListenerMaxConnectionCreationRate holds
	// listener.name.<l>.max.connection.creation.rate like
	// ListenerMaxConnections.
	MaxConnectionCreationRate         int32
	ListenerMaxConnectionCreationRate map[string]int32

	LogSegmentBytes                         int32
	LogRollMs                               int64 // log.roll.ms, else log.roll.hours
	LogRollJitterMs                         int64 // log.roll.jitter.ms, else log.roll.jitter.hours
	LogIndexIntervalBytes                   int32
	LogIndexSizeMaxBytes                    int32
	LogFlushIntervalMessages                int64
	LogFlushIntervalMs                      int64 // log.flush.interval.ms, else the scheduler interval
	LogFlushSchedulerIntervalMs             int64
	LogFlushOffsetCheckpointIntervalMs      int32
	LogFlushStartOffsetCheckpointIntervalMs int32
	LogMessageTimestampType                 string
	LogRetentionMs                          int64 // ms, else minutes, else hours; -1 is forever
	LogRetentionBytes                       int64
	LogRetentionCheckIntervalMs             int64
	LogSegmentDeleteDelayMs                 int64
	LogCleanupPolicy                        []string
	LogCleanerEnable                        bool
	LogCleanerThreads                       int32
	LogCleanerBackoffMs                     int64
	LogCleanerDedupeBufferSize              int64
	LogCleanerDeleteRetentionMs             int64
	LogCleanerMinCleanableRatio             float64
	LogCleanerMinCompactionLagMs            int64
	LogCleanerMaxCompactionLagMs            int64

	BrokerSessionTimeoutMs    int32
	BrokerHeartbeatIntervalMs int32

	OffsetsTopicNumPartitions       int32
	OffsetsTopicReplicationFactor   int16
	OffsetsTopicSegmentBytes        int32
	OffsetsRetentionMinutes         int32
	OffsetsRetentionCheckIntervalMs int64
	OffsetMetadataMaxBytes          int32
	OffsetsCommitTimeoutMs          int32

	GroupCoordinatorRebalanceProtocols []string
	GroupInitialRebalanceDelayMs       int32
	GroupMinSessionTimeoutMs           int32
	GroupMaxSessionTimeoutMs           int32
	GroupMaxSize                       int32
	GroupConsumerSessionTimeoutMs      int32
	GroupConsumerMinSessionTimeoutMs   int32
	GroupConsumerMaxSessionTimeoutMs   int32
	GroupConsumerHeartbeatIntervalMs   int32
	GroupConsumerMinHeartbeatMs        int32
	GroupConsumerMaxHeartbeatMs        int32
	GroupConsumerMaxSize               int32
	GroupConsumerAssignors             []string
	GroupConsumerMigrationPolicy       string
	GroupConsumerAssignmentIntervalMs  int32

	TransactionMaxTimeoutMs                int32
	AddPartitionsToTxnRetryBackoffMs       int32
	AddPartitionsToTxnRetryBackoffMaxMs    int32
	TransactionalIDExpirationMs            int32
	TransactionStateLogNumPartitions       int32
	TransactionStateLogReplicationFactor   int16
	TransactionStateLogMinISR              int32
	TransactionStateLogSegmentBytes        int32
	TransactionAbortTimedOutIntervalMs     int32
	TransactionRemoveExpiredIntervalMs     int32
	TransactionPartitionVerificationEnable bool
	ProducerIDExpirationMs                 int32

	UncleanLeaderElectionEnable bool

	// Raw is what was supplied (file properties with overrides applied,
	// node.id and broker.id filled in from each other), keyed as given.
	Raw map[string]string

	schema *Schema
	// values holds the parsed value of every static key that has one.
	values map[string]any
}

// Schema returns the broker key set the configuration was loaded with.
func (b *Broker) Schema() *Schema { return b.schema }

// Value returns the parsed value of a static broker key (see
// cfgdef.Key for the Go types); false when the key is null.
func (b *Broker) Value(key string) (any, bool) {
	v, ok := b.values[key]
	return v, ok
}

func (b *Broker) mustValue(key string) any {
	v, ok := b.values[key]
	if !ok {
		panic("config: broker key " + key + " has no value")
	}
	return v
}

// Int returns an INT key's value; it panics for a key that is null or of
// another type, which is a programming error.
func (b *Broker) Int(key string) int32 { return b.mustValue(key).(int32) }

// Long returns a LONG key's value.
func (b *Broker) Long(key string) int64 { return b.mustValue(key).(int64) }

// Short returns a SHORT key's value.
func (b *Broker) Short(key string) int16 { return b.mustValue(key).(int16) }

// Bool returns a BOOLEAN key's value.
func (b *Broker) Bool(key string) bool { return b.mustValue(key).(bool) }

// Double returns a DOUBLE key's value.
func (b *Broker) Double(key string) float64 { return b.mustValue(key).(float64) }

// String returns a STRING, CLASS or PASSWORD key's value ("" when null).
func (b *Broker) String(key string) string {
	v, _ := b.values[key].(string)
	return v
}

// List returns a LIST key's value (nil when null).
func (b *Broker) List(key string) []string {
	v, _ := b.values[key].([]string)
	return v
}

// TokenSecretKey is delegation.token.secret.key, the secret delegation
// tokens are signed with; DeprecatedTokenSecretKey is its old alias.
const (
	TokenSecretKey           = "delegation.token.secret.key"
	DeprecatedTokenSecretKey = "delegation.token.master.key"
)

// Load builds a broker configuration from the properties of a file (or
// EmbeddedDefaults) with --override values on top, validating it as Kafka
// 4.3 does. Unknown keys are not an error: they come back as a warning in
// Kafka's words, together with Kafka's other start-up warnings. A bad
// value, a missing required key or a broken cross-key rule is an error
// whose message is Kafka's.
func Load(fileProps, overrides map[string]string) (*Broker, []string, error) {
	return loadWithSchema(NewSchema(), fileProps, overrides)
}

// isAuthorizerKey reports whether StandardAuthorizer reads the key from the
// broker's configuration itself (Kafka hands the authorizer every key);
// such keys are used only when authorizer.class.name is set.
func isAuthorizerKey(name string) bool {
	return name == "super.users" || name == "allow.everyone.if.no.acl.found"
}

func loadWithSchema(schema *Schema, fileProps, overrides map[string]string) (*Broker, []string, error) {
	raw := make(map[string]string, len(fileProps)+len(overrides)+1)
	for k, v := range fileProps {
		raw[k] = v
	}
	for k, v := range overrides {
		raw[k] = v
	}
	// node.id and broker.id are synonyms: either fills in the other.
	nodeID, hasNode := raw["node.id"]
	brokerID, hasBroker := raw["broker.id"]
	if hasNode && !hasBroker {
		raw["broker.id"] = nodeID
	} else if hasBroker && !hasNode {
		raw["node.id"] = brokerID
	}

	b := &Broker{Raw: raw, schema: schema, values: make(map[string]any)}
	var warnings []string
	// delegation.token.master.key was delegation.token.secret.key's
	// deprecated alias until Kafka 4.0 dropped it; Gregor still reads it
	// when the new name is not set, and says so.
	if v, ok := raw[DeprecatedTokenSecretKey]; ok {
		if _, set := raw[TokenSecretKey]; !set {
			raw[TokenSecretKey] = v
			warnings = append(warnings, DeprecatedTokenSecretKey+" is deprecated (Kafka 4 no longer reads it); use "+TokenSecretKey+" instead.")
		} else {
			warnings = append(warnings, DeprecatedTokenSecretKey+" is ignored: "+TokenSecretKey+" is set.")
		}
	}

	names := make([]string, 0, len(raw))
	for k := range raw {
		names = append(names, k)
	}
	sort.Strings(names)
	var unknown []string
	for _, name := range names {
		if strings.HasPrefix(name, "gregor.") {
			if err := checkGregorKey(name, raw[name]); err != nil {
				return nil, nil, err
			}
			continue
		}
		if _, ok := schema.Lookup(name); ok {
			continue
		}
		if _, ok := schema.lookupAny(name); ok {
			continue // listener overrides and dynamic-only keys
		}
		if name == DeprecatedTokenSecretKey {
			continue
		}
		if isRemotePluginKey(raw, name) {
			continue // the remote storage and metadata managers' own keys
		}
		if isAuthorizerKey(name) && strings.TrimSpace(raw["authorizer.class.name"]) != "" {
			continue // the authorizer's own keys
		}
		unknown = append(unknown, name)
	}
	if err := checkGregorPairs(raw); err != nil {
		return nil, nil, err
	}
	if len(unknown) > 0 {
		warnings = append(warnings, fmt.Sprintf("These configurations '[%s]' were supplied but are not used yet.", strings.Join(unknown, ", ")))
	}

	for i := range schema.keys {
		k := &schema.keys[i]
		text, set := raw[k.Name]
		if !set {
			if k.Required {
				return nil, nil, fmt.Errorf("Missing required configuration \"%s\" which has no default value.", k.Name)
			}
			if k.DefaultNull {
				continue
			}
			text = k.Default
		}
		v, err := k.Parse(text)
		if err != nil {
			if !set {
				// Kafka validates its own defaults lazily for the few
				// "non-empty" validators whose default is empty.
				if v, perr := parseTypeOnly(k.Name, k, text); perr == nil {
					b.values[k.Name] = v
					continue
				}
			}
			return nil, nil, err
		}
		b.values[k.Name] = v
	}

	more, err := b.resolve()
	if err != nil {
		return nil, nil, err
	}
	warnings = append(warnings, more...)
	return b, warnings, nil
}

func parseTypeOnly(name string, k *BrokerKey, text string) (any, error) {
	c := k.Key
	c.Validator = nil
	return c.Parse(text)
}

// requirement is Kafka's Scala require(): its failures read "requirement
// failed: ...".
func requirement(ok bool, format string, args ...any) error {
	if ok {
		return nil
	}
	return errors.New("requirement failed: " + fmt.Sprintf(format, args...))
}

// resolve fills the typed fields and checks Kafka's cross-key rules, in
// the order KafkaConfig.validateValues checks them.
func (b *Broker) resolve() ([]string, error) {
	var warnings []string
	b.NodeID = b.Int("node.id")
	if b.Int("broker.id") != b.NodeID {
		return nil, errors.New("You must set `node.id` to the same value as `broker.id`.")
	}
	for _, r := range b.List("process.roles") {
		switch r {
		case "broker":
			b.IsBroker = true
		case "controller":
			b.IsController = true
		}
	}

	b.LogRollMs = b.hoursFallback("log.roll.ms", "log.roll.hours")
	b.LogRollJitterMs = b.hoursFallback("log.roll.jitter.ms", "log.roll.jitter.hours")
	b.LogFlushSchedulerIntervalMs = b.Long("log.flush.scheduler.interval.ms")
	b.LogFlushIntervalMs = b.LogFlushSchedulerIntervalMs
	if v, ok := b.values["log.flush.interval.ms"]; ok {
		b.LogFlushIntervalMs = v.(int64)
	}
	b.LogRetentionMs = b.retentionMs()
	if v, ok := b.values["log.dirs"]; ok {
		b.LogDirs = v.([]string)
	} else {
		b.LogDirs = b.List("log.dir")
	}
	if err := firstError(
		requirement(b.LogRollMs >= 1, "log.roll.ms must be greater than or equal to 1"),
		requirement(b.LogRollJitterMs >= 0, "log.roll.jitter.ms must be greater than or equal to 0"),
		requirement(b.LogRetentionMs >= 1 || b.LogRetentionMs == -1, "log.retention.ms must be unlimited (-1) or, greater than or equal to 1"),
		requirement(len(b.LogDirs) > 0, "At least one log directory must be defined via log.dirs or log.dir."),
	); err != nil {
		return nil, err
	}
	if threads := b.Int("log.cleaner.threads"); threads > 0 {
		if err := requirement(b.Long("log.cleaner.dedupe.buffer.size")/int64(threads) > 1024*1024,
			"log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread."); err != nil {
			return nil, err
		}
	}
	fetchWait := b.Int("replica.fetch.wait.max.ms")
	if err := firstError(
		requirement(fetchWait <= b.Int("replica.socket.timeout.ms"), "replica.socket.timeout.ms should always be at least replica.fetch.wait.max.ms to prevent unnecessary socket timeouts"),
		requirement(int64(fetchWait) <= b.Long("replica.lag.time.max.ms"), "replica.fetch.wait.max.ms should always be less than or equal to replica.lag.time.max.ms to prevent frequent changes in ISR"),
	); err != nil {
		return nil, err
	}
	b.BrokerHeartbeatIntervalMs = b.Int("broker.heartbeat.interval.ms")
	b.BrokerSessionTimeoutMs = b.Int("broker.session.timeout.ms")
	if b.BrokerHeartbeatIntervalMs*2 > b.BrokerSessionTimeoutMs {
		warnings = append(warnings, fmt.Sprintf("broker.heartbeat.interval.ms (%d ms) must be less than or equal to half of the broker.session.timeout.ms (%d ms). If a broker doesn't send heartbeat request within broker.session.timeout.ms, it loses broker lease. Please increase broker.session.timeout.ms or decrease broker.heartbeat.interval.ms.",
			b.BrokerHeartbeatIntervalMs, b.BrokerSessionTimeoutMs))
	}

	more, err := b.resolveListeners()
	if err != nil {
		return nil, err
	}
	warnings = append(warnings, more...)

	if err := b.resolveMisc(); err != nil {
		return nil, err
	}
	b.fillTypedFields()
	return warnings, nil
}

func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// hoursFallback returns msKey's value, else hoursKey's in milliseconds.
func (b *Broker) hoursFallback(msKey, hoursKey string) int64 {
	if v, ok := b.values[msKey]; ok {
		return v.(int64)
	}
	return int64(b.Int(hoursKey)) * 3600 * 1000
}

func (b *Broker) retentionMs() int64 {
	var ms int64
	if v, ok := b.values["log.retention.ms"]; ok {
		ms = v.(int64)
	} else if v, ok := b.values["log.retention.minutes"]; ok {
		ms = int64(v.(int32)) * 60 * 1000
	} else {
		ms = int64(b.Int("log.retention.hours")) * 3600 * 1000
	}
	if ms < 0 {
		return -1
	}
	return ms
}

var securityProtocols = map[string]bool{"PLAINTEXT": true, "SSL": true, "SASL_PLAINTEXT": true, "SASL_SSL": true}

// listenerPattern is Kafka's listener URI form NAME://host:port (IPv6 hosts
// may be bracketed).
var listenerPattern = regexp.MustCompile(`^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$`)

func (b *Broker) parseListeners(key string, entries []string, distinctPorts bool) ([]Listener, error) {
	wrap := func(err error) error {
		return fmt.Errorf("Error creating broker listeners from '[%s]': %w", strings.Join(entries, ", "), err)
	}
	var out []Listener
	for _, e := range entries {
		m := listenerPattern.FindStringSubmatch(e)
		if m == nil {
			return nil, wrap(fmt.Errorf("Unable to parse %s to a broker endpoint", e))
		}
		name := strings.ToUpper(m[1])
		port, err := strconv.ParseInt(m[3], 10, 32)
		if err != nil {
			return nil, wrap(fmt.Errorf("For input string: \"%s\"", m[3]))
		}
		proto, ok := b.ListenerSecurityProtocolMap[name]
		if !ok {
			return nil, wrap(fmt.Errorf("No security protocol defined for listener %s", name))
		}
		out = append(out, Listener{Name: name, Host: m[2], Port: int32(port), SecurityProtocol: proto})
	}
	names := map[string]bool{}
	for _, l := range out {
		if names[l.Name] {
			return nil, wrap(fmt.Errorf("Each listener must have a different name, listeners: %s", strings.Join(entries, ",")))
		}
		names[l.Name] = true
	}
	if distinctPorts {
		if err := checkListenerPorts(out, entries); err != nil {
			return nil, wrap(err)
		}
	}
	return out, nil
}

// checkListenerPorts refuses two listeners on one port, except one IPv4
// and one IPv6 address.
func checkListenerPorts(listeners []Listener, entries []string) error {
	byPort := map[int32][]Listener{}
	for _, l := range listeners {
		if l.Port != 0 {
			byPort[l.Port] = append(byPort[l.Port], l)
		}
	}
	for port, ls := range byPort {
		if len(ls) < 2 {
			continue
		}
		var v4, v6, other int
		for _, l := range ls {
			addr, err := netip.ParseAddr(l.Host)
			switch {
			case err != nil:
				other++
			case addr.Is4():
				v4++
			default:
				v6++
			}
		}
		if other > 1 || len(ls) > 2 {
			if len(ls) > 2 && other == 0 {
				return fmt.Errorf("Each listener must have a different port unless exactly one listener has an IPv4 address and the other IPv6 address, listeners: %s, port: %d", strings.Join(entries, ","), port)
			}
			return fmt.Errorf("Each listener must have a different port, listeners: %s", strings.Join(entries, ","))
		}
		if !(v4 == 1 && v6 == 1) {
			return fmt.Errorf("If you have two listeners on the same port then one needs to be IPv4 and the other IPv6, listeners: %s, port: %d", strings.Join(entries, ","), port)
		}
	}
	return nil
}

func (b *Broker) resolveListeners() ([]string, error) {
	var warnings []string
	b.ControllerListenerNames = b.List("controller.listener.names")
	isController := map[string]bool{}
	for _, n := range b.ControllerListenerNames {
		isController[n] = true
	}

	// listener.security.protocol.map
	b.ListenerSecurityProtocolMap = map[string]string{}
	mapText := b.String("listener.security.protocol.map")
	if strings.TrimSpace(mapText) != "" {
		for _, pair := range strings.Split(mapText, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(pair), ":")
			if !ok || strings.TrimSpace(k) == "" {
				return nil, fmt.Errorf("Error parsing configuration property 'listener.security.protocol.map': Malformed key-value pair %s", pair)
			}
			proto := strings.TrimSpace(v)
			if !securityProtocols[proto] {
				return nil, fmt.Errorf("Invalid security protocol `%s` defined in listener.security.protocol.map", proto)
			}
			b.ListenerSecurityProtocolMap[strings.ToUpper(strings.TrimSpace(k))] = proto
		}
	}
	if _, explicit := b.Raw["listener.security.protocol.map"]; !explicit {
		usesSecurity := false
		for _, n := range b.ControllerListenerNames {
			usesSecurity = usesSecurity || isSSLOrSASL(n)
		}
		for _, l := range b.List("listeners") {
			name, _, _ := strings.Cut(l, ":")
			usesSecurity = usesSecurity || isSSLOrSASL(strings.ToUpper(name))
		}
		if !usesSecurity {
			for _, n := range b.ControllerListenerNames {
				if n != "PLAINTEXT" {
					b.ListenerSecurityProtocolMap[n] = "PLAINTEXT"
				}
			}
		}
	}

	var err error
	if b.Listeners, err = b.parseListeners("listeners", b.List("listeners"), true); err != nil {
		return nil, err
	}
	var advertised []Listener
	if entries, ok := b.values["advertised.listeners"]; ok {
		if advertised, err = b.parseListeners("advertised.listeners", entries.([]string), false); err != nil {
			return nil, err
		}
	} else {
		advertised = b.Listeners
	}
	b.AdvertisedListeners = nil
	for _, l := range advertised {
		if !isController[l.Name] {
			b.AdvertisedListeners = append(b.AdvertisedListeners, l)
		}
	}
	// Controller listeners as advertised: the advertised.listeners entry
	// of the same name if there is one, else the bound listener.
	var controllerListeners []Listener
	for _, l := range b.Listeners {
		if isController[l.Name] {
			controllerListeners = append(controllerListeners, l)
		}
	}
	b.AdvertisedControllerListeners = nil
	for _, name := range b.ControllerListenerNames {
		var found *Listener
		if _, ok := b.values["advertised.listeners"]; ok {
			for i := range advertised {
				if advertised[i].Name == strings.ToUpper(name) {
					found = &advertised[i]
				}
			}
		}
		if found == nil {
			for i := range controllerListeners {
				if controllerListeners[i].Name == strings.ToUpper(name) {
					found = &controllerListeners[i]
				}
			}
		}
		if found != nil {
			b.AdvertisedControllerListeners = append(b.AdvertisedControllerListeners, *found)
		}
	}

	// inter.broker.listener.name / security.inter.broker.protocol
	if name, ok := b.values["inter.broker.listener.name"]; ok {
		if _, both := b.Raw["security.inter.broker.protocol"]; both {
			return nil, errors.New("Only one of inter.broker.listener.name and security.inter.broker.protocol should be set.")
		}
		b.InterBrokerListenerName = strings.ToUpper(name.(string))
		if _, ok := b.ListenerSecurityProtocolMap[b.InterBrokerListenerName]; !ok {
			return nil, fmt.Errorf("Listener with name %s defined in inter.broker.listener.name not found in listener.security.protocol.map.", b.InterBrokerListenerName)
		}
	} else {
		b.InterBrokerListenerName = b.String("security.inter.broker.protocol")
	}

	// quorum
	b.ControllerQuorumBootstrapServers = b.List("controller.quorum.bootstrap.servers")
	if b.ControllerQuorumVoters, err = parseVoters(b.List("controller.quorum.voters")); err != nil {
		return nil, err
	}
	voterIDs := map[int32]bool{}
	for _, v := range b.ControllerQuorumVoters {
		voterIDs[v.ID] = true
	}
	voterSet := func() string {
		ids := make([]string, 0, len(voterIDs))
		for _, v := range b.ControllerQuorumVoters {
			ids = append(ids, strconv.Itoa(int(v.ID)))
		}
		return "Set(" + strings.Join(ids, ", ") + ")"
	}
	quorumConfigured := func() error {
		if len(voterIDs) == 0 && len(b.ControllerQuorumBootstrapServers) == 0 {
			return errors.New("If using process.roles, either controller.quorum.bootstrap.servers must contain the set of bootstrap controllers or controller.quorum.voters must contain a parseable set of controllers.")
		}
		return nil
	}
	listenerNames := map[string]bool{}
	for _, l := range b.Listeners {
		listenerNames[l.Name] = true
	}
	controllerChecks := func() error {
		if err := requirement(len(voterIDs) == 0 || voterIDs[b.NodeID],
			"If process.roles contains the 'controller' role, the node id %d must be included in the set of voters controller.quorum.voters=%s", b.NodeID, voterSet()); err != nil {
			return err
		}
		if err := requirement(len(b.AdvertisedControllerListeners) > 0,
			"controller.listener.names must contain at least one value appearing in the 'listeners' configuration when running the KRaft controller role"); err != nil {
			return err
		}
		for _, n := range b.ControllerListenerNames {
			if !listenerNames[n] {
				return requirement(false, "controller.listener.names must only contain values appearing in the 'listeners' configuration when running the KRaft controller role")
			}
		}
		return nil
	}

	switch {
	case b.IsBroker && !b.IsController:
		if err := quorumConfigured(); err != nil {
			return nil, err
		}
		if err := requirement(!voterIDs[b.NodeID],
			"If process.roles contains just the 'broker' role, the node id %d must not be included in the set of voters controller.quorum.voters=%s", b.NodeID, voterSet()); err != nil {
			return nil, err
		}
		if err := requirement(len(controllerListeners) == 0,
			"controller.listener.names must not contain a value appearing in the 'listeners' configuration when running KRaft with just the broker role"); err != nil {
			return nil, err
		}
		for _, n := range b.ControllerListenerNames {
			if _, ok := b.ListenerSecurityProtocolMap[strings.ToUpper(n)]; !ok {
				return nil, fmt.Errorf("Controller listener with name %s defined in controller.listener.names not found in listener.security.protocol.map  (an explicit security mapping for each controller listener is required if listener.security.protocol.map is non-empty, or if there are security protocols other than PLAINTEXT in use)", strings.ToUpper(n))
			}
		}
		if err := requirement(!b.Bool("controller.quorum.auto.join.enable"),
			"controller.quorum.auto.join.enable is only supported when process.roles contains the 'controller' role."); err != nil {
			return nil, err
		}
		if len(b.ControllerListenerNames) > 1 {
			warnings = append(warnings, fmt.Sprintf("controller.listener.names has multiple entries; only the first will be used since process.roles=broker: [%s]", strings.Join(b.ControllerListenerNames, ", ")))
		}
		for _, k := range []string{"create.topic.policy.class.name", "alter.config.policy.class.name"} {
			if _, ok := b.Raw[k]; ok {
				warnings = append(warnings, fmt.Sprintf("%s is defined in broker. It should be defined in the controller role.", k))
			}
		}
		for _, k := range []string{"num.partitions", "default.replication.factor"} {
			if _, ok := b.Raw[k]; ok {
				warnings = append(warnings, fmt.Sprintf("%s is defined in the broker role. This configuration will be ignored in 5.0. Please set %s in the controller role instead.", k, k))
			}
		}
	case b.IsController && !b.IsBroker:
		if err := quorumConfigured(); err != nil {
			return nil, err
		}
		if err := requirement(len(b.AdvertisedControllerListeners) == len(b.Listeners),
			"The listeners config must only contain KRaft controller listeners from controller.listener.names when process.roles=controller"); err != nil {
			return nil, err
		}
		if _, ok := b.values["inter.broker.listener.name"]; ok && isController[b.InterBrokerListenerName] {
			return nil, requirement(false, "controller.listener.names must not contain an explicitly set inter.broker.listener.name configuration value when process.roles=controller'")
		}
		if err := controllerChecks(); err != nil {
			return nil, err
		}
	default: // combined
		if err := quorumConfigured(); err != nil {
			return nil, err
		}
		if err := controllerChecks(); err != nil {
			return nil, err
		}
	}

	if b.IsBroker {
		advertisedNames := map[string]bool{}
		var names []string
		for _, l := range b.AdvertisedListeners {
			if !advertisedNames[l.Name] {
				names = append(names, l.Name)
			}
			advertisedNames[l.Name] = true
		}
		if len(advertisedNames) == 0 {
			return nil, requirement(false, "There must be at least one broker advertised listener. Perhaps all listeners appear in controller.listener.names?")
		}
		if !advertisedNames[b.InterBrokerListenerName] {
			return nil, requirement(false, "inter.broker.listener.name must be a listener name defined in advertised.listeners. The valid options based on currently configured listeners are %s", strings.Join(names, ","))
		}
		for n := range advertisedNames {
			if !listenerNames[n] {
				var all []string
				for _, l := range b.Listeners {
					all = append(all, l.Name)
				}
				return nil, requirement(false, "advertised.listeners listener names must be equal to or a subset of the ones defined in listeners. Found %s. The valid options based on the current configuration are %s", strings.Join(names, ","), strings.Join(all, ","))
			}
		}
		if err := b.checkCordonedLogDirs(); err != nil {
			return nil, err
		}
	}
	for _, l := range append(append([]Listener{}, b.AdvertisedListeners...), b.AdvertisedControllerListeners...) {
		if l.Host == "0.0.0.0" {
			return nil, requirement(false, "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. Use a routable IP address.")
		}
	}
	if v, ok := b.values["early.start.listeners"]; ok {
		for _, n := range v.([]string) {
			n = strings.TrimSpace(n)
			if n != "" && !listenerNames[n] && !isController[n] {
				return nil, fmt.Errorf("early.start.listeners contains listener %s, but this is not contained in listeners or controller.listener.names", n)
			}
		}
	}
	return warnings, nil
}

func isSSLOrSASL(name string) bool {
	return name == "SSL" || name == "SASL_SSL" || name == "SASL_PLAINTEXT"
}

func (b *Broker) checkCordonedLogDirs() error {
	cordoned := b.List("cordoned.log.dirs")
	if len(cordoned) == 0 {
		return nil
	}
	for _, d := range cordoned {
		if d == "*" {
			return requirement(len(cordoned) == 1, "When cordoned.log.dirs is set to *, it must not contain other values")
		}
	}
	known := map[string]bool{}
	for _, d := range b.LogDirs {
		known[d] = true
	}
	var missing []string
	for _, d := range cordoned {
		if !known[d] {
			missing = append(missing, d)
		}
	}
	return requirement(len(missing) == 0, "All entries in cordoned.log.dirs must be present in log.dirs or log.dir. Missing entries : %s", strings.Join(missing, ", "))
}

func (b *Broker) resolveMisc() error {
	protocol := b.ListenerSecurityProtocolMap[b.InterBrokerListenerName]
	if protocol == "SASL_PLAINTEXT" || protocol == "SASL_SSL" {
		mech := b.String("sasl.mechanism.inter.broker.protocol")
		mechs := b.List("sasl.enabled.mechanisms")
		if override, ok := b.Raw["listener.name."+strings.ToLower(b.InterBrokerListenerName)+".sasl.enabled.mechanisms"]; ok {
			mechs = strings.Split(override, ",")
		}
		found := false
		for _, m := range mechs {
			found = found || strings.TrimSpace(m) == mech
		}
		if err := requirement(found, "sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms when SASL is used for inter-broker communication"); err != nil {
			return err
		}
	}
	queued := b.Long("queued.max.request.bytes")
	if err := requirement(queued <= 0 || queued >= int64(b.Int("socket.request.max.bytes")),
		"queued.max.request.bytes must be larger or equal to socket.request.max.bytes"); err != nil {
		return err
	}
	overrides := strings.TrimSpace(b.String("max.connections.per.ip.overrides"))
	if b.Int("max.connections.per.ip") == 0 {
		if err := requirement(overrides != "", "max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides property is set."); err != nil {
			return err
		}
	}
	b.MaxConnectionsPerIPOverrides = map[string]int32{}
	if overrides != "" {
		for _, pair := range strings.Split(overrides, ",") {
			host, count, ok := strings.Cut(strings.TrimSpace(pair), ":")
			n, err := strconv.ParseInt(strings.TrimSpace(count), 10, 32)
			if !ok || err != nil || strings.TrimSpace(host) == "" {
				return fmt.Errorf("Error parsing configuration property 'max.connections.per.ip.overrides': Malformed key-value pair %s", pair)
			}
			b.MaxConnectionsPerIPOverrides[strings.TrimSpace(host)] = int32(n)
		}
	}
	var err error
	if b.ListenerMaxConnections, err = b.resolveListenerInts("max.connections"); err != nil {
		return err
	}
	if b.ListenerMaxConnectionCreationRate, err = b.resolveListenerInts("max.connection.creation.rate"); err != nil {
		return err
	}
	if idle := b.Long("connections.max.idle.ms"); idle >= 0 {
		delay := b.Int("connection.failed.authentication.delay.ms")
		if err := requirement(int64(delay) < idle,
			"connection.failed.authentication.delay.ms=%d should always be less than connections.max.idle.ms=%d to prevent failed authentication responses from timing out", delay, idle); err != nil {
			return err
		}
	}
	protocols := b.List("group.coordinator.rebalance.protocols")
	hasClassic := false
	for _, p := range protocols {
		hasClassic = hasClassic || p == "classic"
	}
	if !hasClassic {
		return errors.New("Disabling the 'classic' protocol is not supported.")
	}
	return nil
}

// resolveListenerInts reads listener.name.<l>.<key> of an int key for
// every listener that sets it, validated as key is, by listener name.
func (b *Broker) resolveListenerInts(key string) (map[string]int32, error) {
	out := map[string]int32{}
	base, _ := b.schema.Lookup(key)
	for _, l := range b.Listeners {
		name := "listener.name." + strings.ToLower(l.Name) + "." + key
		text, ok := b.Raw[name]
		if !ok {
			continue
		}
		k := base.Key
		k.Name = name
		v, err := k.Parse(text)
		if err != nil {
			return nil, err
		}
		out[l.Name] = v.(int32)
	}
	return out, nil
}

func (b *Broker) fillTypedFields() {
	b.MetadataLogDir = b.String("metadata.log.dir")
	if b.MetadataLogDir == "" {
		b.MetadataLogDir = b.LogDirs[0]
	}
	b.NumPartitions = b.Int("num.partitions")
	b.DefaultReplicationFactor = b.Int("default.replication.factor")
	b.MinInsyncReplicas = b.Int("min.insync.replicas")
	b.AutoCreateTopicsEnable = b.Bool("auto.create.topics.enable")
	b.DeleteTopicEnable = b.Bool("delete.topic.enable")
	b.MessageMaxBytes = b.Int("message.max.bytes")
	b.SocketRequestMaxBytes = b.Int("socket.request.max.bytes")
	b.ConnectionsMaxIdleMs = b.Long("connections.max.idle.ms")
	b.SocketSendBufferBytes = b.Int("socket.send.buffer.bytes")
	b.SocketReceiveBufferBytes = b.Int("socket.receive.buffer.bytes")
	b.QueuedMaxRequestBytes = b.Long("queued.max.request.bytes")
	b.MaxConnections = b.Int("max.connections")
	b.MaxConnectionCreationRate = b.Int("max.connection.creation.rate")
	b.MaxConnectionsPerIP = b.Int("max.connections.per.ip")
	b.NumNetworkThreads = b.Int("num.network.threads")
	b.NumIOThreads = b.Int("num.io.threads")
	b.CompressionType = b.String("compression.type")

	b.LogSegmentBytes = b.Int("log.segment.bytes")
	b.LogIndexIntervalBytes = b.Int("log.index.interval.bytes")
	b.LogIndexSizeMaxBytes = b.Int("log.index.size.max.bytes")
	b.LogFlushIntervalMessages = b.Long("log.flush.interval.messages")
	b.LogFlushOffsetCheckpointIntervalMs = b.Int("log.flush.offset.checkpoint.interval.ms")
	b.LogFlushStartOffsetCheckpointIntervalMs = b.Int("log.flush.start.offset.checkpoint.interval.ms")
	b.LogMessageTimestampType = b.String("log.message.timestamp.type")
	b.LogRetentionBytes = b.Long("log.retention.bytes")
	b.LogRetentionCheckIntervalMs = b.Long("log.retention.check.interval.ms")
	b.LogSegmentDeleteDelayMs = b.Long("log.segment.delete.delay.ms")
	b.LogCleanupPolicy = b.List("log.cleanup.policy")
	b.LogCleanerEnable = b.Bool("log.cleaner.enable")
	b.LogCleanerThreads = b.Int("log.cleaner.threads")
	b.LogCleanerBackoffMs = b.Long("log.cleaner.backoff.ms")
	b.LogCleanerDedupeBufferSize = b.Long("log.cleaner.dedupe.buffer.size")
	b.LogCleanerDeleteRetentionMs = b.Long("log.cleaner.delete.retention.ms")
	b.LogCleanerMinCleanableRatio = b.Double("log.cleaner.min.cleanable.ratio")
	b.LogCleanerMinCompactionLagMs = b.Long("log.cleaner.min.compaction.lag.ms")
	b.LogCleanerMaxCompactionLagMs = b.Long("log.cleaner.max.compaction.lag.ms")

	b.OffsetsTopicNumPartitions = b.Int("offsets.topic.num.partitions")
	b.OffsetsTopicReplicationFactor = b.Short("offsets.topic.replication.factor")
	b.OffsetsTopicSegmentBytes = b.Int("offsets.topic.segment.bytes")
	b.OffsetsRetentionMinutes = b.Int("offsets.retention.minutes")
	b.OffsetsRetentionCheckIntervalMs = b.Long("offsets.retention.check.interval.ms")
	b.OffsetMetadataMaxBytes = b.Int("offset.metadata.max.bytes")
	b.OffsetsCommitTimeoutMs = b.Int("offsets.commit.timeout.ms")

	b.GroupCoordinatorRebalanceProtocols = b.List("group.coordinator.rebalance.protocols")
	b.GroupInitialRebalanceDelayMs = b.Int("group.initial.rebalance.delay.ms")
	b.GroupMinSessionTimeoutMs = b.Int("group.min.session.timeout.ms")
	b.GroupMaxSessionTimeoutMs = b.Int("group.max.session.timeout.ms")
	b.GroupMaxSize = b.Int("group.max.size")
	b.GroupConsumerSessionTimeoutMs = b.Int("group.consumer.session.timeout.ms")
	b.GroupConsumerMinSessionTimeoutMs = b.Int("group.consumer.min.session.timeout.ms")
	b.GroupConsumerMaxSessionTimeoutMs = b.Int("group.consumer.max.session.timeout.ms")
	b.GroupConsumerHeartbeatIntervalMs = b.Int("group.consumer.heartbeat.interval.ms")
	b.GroupConsumerMinHeartbeatMs = b.Int("group.consumer.min.heartbeat.interval.ms")
	b.GroupConsumerMaxHeartbeatMs = b.Int("group.consumer.max.heartbeat.interval.ms")
	b.GroupConsumerMaxSize = b.Int("group.consumer.max.size")
	b.GroupConsumerAssignors = b.List("group.consumer.assignors")
	b.GroupConsumerMigrationPolicy = b.String("group.consumer.migration.policy")
	b.GroupConsumerAssignmentIntervalMs = b.Int("group.consumer.assignment.interval.ms")

	b.TransactionMaxTimeoutMs = b.Int("transaction.max.timeout.ms")
	b.AddPartitionsToTxnRetryBackoffMs = b.Int("add.partitions.to.txn.retry.backoff.ms")
	b.AddPartitionsToTxnRetryBackoffMaxMs = b.Int("add.partitions.to.txn.retry.backoff.max.ms")
	b.TransactionalIDExpirationMs = b.Int("transactional.id.expiration.ms")
	b.TransactionStateLogNumPartitions = b.Int("transaction.state.log.num.partitions")
	b.TransactionStateLogReplicationFactor = b.Short("transaction.state.log.replication.factor")
	b.TransactionStateLogMinISR = b.Int("transaction.state.log.min.isr")
	b.TransactionStateLogSegmentBytes = b.Int("transaction.state.log.segment.bytes")
	b.TransactionAbortTimedOutIntervalMs = b.Int("transaction.abort.timed.out.transaction.cleanup.interval.ms")
	b.TransactionRemoveExpiredIntervalMs = b.Int("transaction.remove.expired.transaction.cleanup.interval.ms")
	b.TransactionPartitionVerificationEnable = b.Bool("transaction.partition.verification.enable")
	b.ProducerIDExpirationMs = b.Int("producer.id.expiration.ms")

	b.UncleanLeaderElectionEnable = b.Bool("unclean.leader.election.enable")
}
