package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestLoadEmbeddedDefaults(t *testing.T) {
	b, warnings, err := Load(EmbeddedDefaults(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 {
		t.Errorf("unexpected warnings %v", warnings)
	}
	if b.NodeID != 1 || !b.IsBroker || !b.IsController {
		t.Errorf("roles/node: %+v", b)
	}
	wantListeners := []Listener{
		{Name: "PLAINTEXT", Host: "localhost", Port: 9092, SecurityProtocol: "PLAINTEXT"},
		{Name: "CONTROLLER", Host: "localhost", Port: 9093, SecurityProtocol: "PLAINTEXT"},
	}
	if !reflect.DeepEqual(b.Listeners, wantListeners) {
		t.Errorf("listeners %+v", b.Listeners)
	}
	if !reflect.DeepEqual(b.AdvertisedListeners, wantListeners[:1]) || !reflect.DeepEqual(b.AdvertisedControllerListeners, wantListeners[1:]) {
		t.Errorf("advertised %+v / %+v", b.AdvertisedListeners, b.AdvertisedControllerListeners)
	}
	if b.InterBrokerListenerName != "PLAINTEXT" || !reflect.DeepEqual(b.LogDirs, []string{"./gregor-data"}) || b.MetadataLogDir != "./gregor-data" {
		t.Errorf("listener/log dirs: %q %v %q", b.InterBrokerListenerName, b.LogDirs, b.MetadataLogDir)
	}
	if b.OffsetsTopicReplicationFactor != 1 || b.TransactionStateLogReplicationFactor != 1 || b.TransactionStateLogMinISR != 1 {
		t.Errorf("internal topic replication not 1")
	}
	// Kafka's defaults for everything else.
	if b.NumPartitions != 1 || b.LogRetentionMs != 604800000 || b.LogRollMs != 604800000 || b.LogFlushIntervalMs != 1<<63-1 ||
		b.MessageMaxBytes != 1048588 || b.OffsetsTopicNumPartitions != 50 || b.GroupConsumerSessionTimeoutMs != 45000 ||
		b.TransactionMaxTimeoutMs != 900000 || !b.AutoCreateTopicsEnable || b.LogSegmentBytes != 1<<30 ||
		!reflect.DeepEqual(b.GroupConsumerAssignors, []string{"uniform", "range"}) || b.LogCleanerMinCleanableRatio != 0.5 {
		t.Errorf("defaults wrong: %+v", b)
	}
	if b.Long("log.cleaner.backoff.ms") != 15000 || b.String("group.consumer.migration.policy") != "bidirectional" {
		t.Errorf("getters wrong")
	}
}

func TestLoadKafkaSampleAndOverrides(t *testing.T) {
	file := map[string]string{
		"process.roles":                           "broker,controller",
		"node.id":                                 "1",
		"controller.quorum.bootstrap.servers":     "localhost:9093",
		"listeners":                               "PLAINTEXT://:9092,CONTROLLER://:9093",
		"inter.broker.listener.name":              "PLAINTEXT",
		"advertised.listeners":                    "PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093",
		"controller.listener.names":               "CONTROLLER",
		"listener.security.protocol.map":          "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
		"num.network.threads":                     "3",
		"num.io.threads":                          "8",
		"log.dirs":                                "/tmp/kraft-combined-logs",
		"log.retention.hours":                     "168",
		"log.segment.bytes":                       "1073741824",
		"made.up.key":                             "1",
		"another.unknown":                         "x",
		"listener.name.plaintext.max.connections": "10",
	}
	b, warnings, err := Load(file, map[string]string{"log.retention.minutes": "5", "num.partitions": "3"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"These configurations '[another.unknown, made.up.key]' were supplied but are not used yet."}; !reflect.DeepEqual(warnings, want) {
		t.Errorf("warnings %q", warnings)
	}
	if b.LogRetentionMs != 300000 || b.NumPartitions != 3 {
		t.Errorf("overrides not applied: %d %d", b.LogRetentionMs, b.NumPartitions)
	}
	if b.Listeners[0].Host != "" || b.AdvertisedListeners[0].Host != "localhost" || b.AdvertisedControllerListeners[0].Host != "localhost" {
		t.Errorf("listeners %+v %+v", b.Listeners, b.AdvertisedListeners)
	}
	if b.Raw["broker.id"] != "1" {
		t.Errorf("broker.id not filled from node.id")
	}
	if !reflect.DeepEqual(b.ListenerMaxConnections, map[string]int32{"PLAINTEXT": 10}) {
		t.Errorf("listener max.connections %v", b.ListenerMaxConnections)
	}
}

func TestLoadConnectionLimits(t *testing.T) {
	b, _, err := Load(EmbeddedDefaults(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.ConnectionsMaxIdleMs != 600000 || b.QueuedMaxRequestBytes != -1 || b.MaxConnections != 1<<31-1 ||
		b.MaxConnectionsPerIP != 1<<31-1 || len(b.MaxConnectionsPerIPOverrides) != 0 || len(b.ListenerMaxConnections) != 0 {
		t.Errorf("defaults: idle %d queued %d max %d per ip %d overrides %v listeners %v", b.ConnectionsMaxIdleMs, b.QueuedMaxRequestBytes,
			b.MaxConnections, b.MaxConnectionsPerIP, b.MaxConnectionsPerIPOverrides, b.ListenerMaxConnections)
	}
	b, _, err = Load(EmbeddedDefaults(), map[string]string{
		"connections.max.idle.ms":                  "-1",
		"max.connections.per.ip":                   "0",
		"max.connections.per.ip.overrides":         "127.0.0.1:5, broker-host:7",
		"listener.name.controller.max.connections": "3",
	})
	if err != nil {
		t.Fatal(err)
	}
	if b.ConnectionsMaxIdleMs != -1 || b.MaxConnectionsPerIP != 0 ||
		!reflect.DeepEqual(b.MaxConnectionsPerIPOverrides, map[string]int32{"127.0.0.1": 5, "broker-host": 7}) ||
		!reflect.DeepEqual(b.ListenerMaxConnections, map[string]int32{"CONTROLLER": 3}) {
		t.Errorf("overrides: idle %d per ip %d overrides %v listeners %v", b.ConnectionsMaxIdleMs, b.MaxConnectionsPerIP,
			b.MaxConnectionsPerIPOverrides, b.ListenerMaxConnections)
	}
	_, _, err = Load(EmbeddedDefaults(), map[string]string{"listener.name.plaintext.max.connections": "-2"})
	if want := "Invalid value -2 for configuration listener.name.plaintext.max.connections: Value must be at least 0"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
}

func TestLoadBrokerOnly(t *testing.T) {
	props := map[string]string{
		"process.roles": "broker", "node.id": "2", "controller.quorum.bootstrap.servers": "c1:9093",
		"listeners": "PLAINTEXT://:9092", "controller.listener.names": "CONTROLLER", "log.dirs": "/d",
		"num.partitions": "2",
	}
	b, warnings, err := Load(props, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.IsController || !b.IsBroker || len(warnings) != 1 || !strings.HasPrefix(warnings[0], "num.partitions is defined in the broker role") {
		t.Errorf("broker-only: %+v %q", b, warnings)
	}
}

func TestLoadErrors(t *testing.T) {
	base := EmbeddedDefaults
	with := func(kv ...string) map[string]string {
		m := base()
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "<delete>" {
				delete(m, kv[i])
			} else {
				m[kv[i]] = kv[i+1]
			}
		}
		return m
	}
	cases := []struct {
		name  string
		props map[string]string
		want  string
	}{
		{"not a number", with("num.partitions", "abc"), "Invalid value abc for configuration num.partitions: Not a number of type INT"},
		{"below minimum", with("num.partitions", "0"), "Invalid value 0 for configuration num.partitions: Value must be at least 1"},
		{"bad boolean", with("auto.create.topics.enable", "yes"), "Invalid value yes for configuration auto.create.topics.enable: Expected value to be either true or false"},
		{"bad enum", with("log.message.timestamp.type", "Now"), "Invalid value Now for configuration log.message.timestamp.type: String must be one of: CreateTime, LogAppendTime"},
		{"bad role", with("process.roles", "broker,leader"), "Invalid value leader for configuration process.roles: String must be one of: broker, controller"},
		{"missing node.id", with("node.id", "<delete>"), `Missing required configuration "node.id" which has no default value.`},
		{"missing process.roles", with("process.roles", "<delete>"), `Missing required configuration "process.roles" which has no default value.`},
		{"node.id != broker.id", with("broker.id", "7"), "You must set `node.id` to the same value as `broker.id`."},
		{"controller listener not in listeners", with("controller.listener.names", "CTRL", "listener.security.protocol.map", "CTRL:PLAINTEXT,CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"),
			"requirement failed: controller.listener.names must contain at least one value appearing in the 'listeners' configuration when running the KRaft controller role"},
		{"no quorum", with("controller.quorum.bootstrap.servers", "<delete>"),
			"If using process.roles, either controller.quorum.bootstrap.servers must contain the set of bootstrap controllers or controller.quorum.voters must contain a parseable set of controllers."},
		{"voters must contain node", with("controller.quorum.voters", "2@localhost:9093"),
			"requirement failed: If process.roles contains the 'controller' role, the node id 1 must be included in the set of voters controller.quorum.voters=Set(2)"},
		{"bad voters", with("controller.quorum.voters", "localhost:9093"),
			"Invalid configuration value for controller.quorum.voters. Each entry should be in the form `{id}@{host}:{port}`."},
		{"unknown listener protocol", with("listeners", "PLAINTEXT://:9092,CONTROLLER://:9093,FOO://:9094"),
			"Error creating broker listeners from '[PLAINTEXT://:9092, CONTROLLER://:9093, FOO://:9094]': No security protocol defined for listener FOO"},
		{"duplicate port", with("listeners", "PLAINTEXT://:9092,CONTROLLER://:9092"),
			"Error creating broker listeners from '[PLAINTEXT://:9092, CONTROLLER://:9092]': Each listener must have a different port, listeners: PLAINTEXT://:9092,CONTROLLER://:9092"},
		{"unparseable listener", with("listeners", "PLAINTEXT:9092,CONTROLLER://:9093"),
			"Error creating broker listeners from '[PLAINTEXT:9092, CONTROLLER://:9093]': Unable to parse PLAINTEXT:9092 to a broker endpoint"},
		{"advertise 0.0.0.0", with("advertised.listeners", "PLAINTEXT://0.0.0.0:9092"),
			"requirement failed: advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. Use a routable IP address."},
		{"both inter broker keys", with("security.inter.broker.protocol", "PLAINTEXT"),
			"Only one of inter.broker.listener.name and security.inter.broker.protocol should be set."},
		{"inter broker listener not advertised", with("inter.broker.listener.name", "SSL"),
			"requirement failed: inter.broker.listener.name must be a listener name defined in advertised.listeners. The valid options based on currently configured listeners are PLAINTEXT"},
		{"broker-only with controller listener in listeners", map[string]string{"process.roles": "broker", "node.id": "2", "controller.quorum.bootstrap.servers": "c:9093",
			"listeners": "PLAINTEXT://:9092,CONTROLLER://:9093", "controller.listener.names": "CONTROLLER"},
			"requirement failed: controller.listener.names must not contain a value appearing in the 'listeners' configuration when running KRaft with just the broker role"},
		{"roll ms zero", with("log.roll.ms", "0"), "requirement failed: log.roll.ms must be greater than or equal to 1"},
		{"retention 0", with("log.retention.ms", "0"), "requirement failed: log.retention.ms must be unlimited (-1) or, greater than or equal to 1"},
		{"fetch wait above socket timeout", with("replica.fetch.wait.max.ms", "40000"),
			"requirement failed: replica.socket.timeout.ms should always be at least replica.fetch.wait.max.ms to prevent unnecessary socket timeouts"},
		{"classic disabled", with("group.coordinator.rebalance.protocols", "consumer"), "Disabling the 'classic' protocol is not supported."},
		{"empty listeners", with("listeners", ""), "Configuration 'listeners' must not be empty. Valid values include: any non-empty value"},
		{"queued bytes", with("queued.max.request.bytes", "10"), "requirement failed: queued.max.request.bytes must be larger or equal to socket.request.max.bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Load(tc.props, nil)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got %v\nwant %s", err, tc.want)
			}
		})
	}
}

// TestLoadDelegationTokenSecretAlias: delegation.token.master.key fills
// in delegation.token.secret.key with a warning, and never overrides it.
func TestLoadDelegationTokenSecretAlias(t *testing.T) {
	props := EmbeddedDefaults()
	props[DeprecatedTokenSecretKey] = "old-secret"
	b, warnings, err := Load(props, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(TokenSecretKey); got != "old-secret" {
		t.Fatalf("secret %q", got)
	}
	joined := strings.Join(warnings, "\n")
	if !strings.Contains(joined, "delegation.token.master.key is deprecated") || strings.Contains(joined, "not used yet") {
		t.Fatalf("warnings %q", warnings)
	}
	props[TokenSecretKey] = "new-secret"
	b, warnings, err = Load(props, nil)
	if err != nil || b.String(TokenSecretKey) != "new-secret" || !strings.Contains(strings.Join(warnings, "\n"), "is ignored") {
		t.Fatalf("both set: %q %q %v", b.String(TokenSecretKey), warnings, err)
	}
	// The lifetimes and the check interval are Kafka's, with defaults.
	if b.Long("delegation.token.max.lifetime.ms") != 604800000 || b.Long("delegation.token.expiry.time.ms") != 86400000 ||
		b.Long("delegation.token.expiry.check.interval.ms") != 3600000 {
		t.Fatal("delegation token defaults")
	}
	props["delegation.token.expiry.time.ms"] = "0"
	if _, _, err := Load(props, nil); err == nil || !strings.Contains(err.Error(), "Value must be at least 1") {
		t.Fatalf("expiry.time.ms 0: %v", err)
	}
}
