// Package config is the config-definition machinery that the broker, topic,
// group and controller schemas share, modelled on Kafka's ConfigDef.
//
// It owns:
//   - value types (Type, with DescribeConfigs' ConfigType codes), parsing
//     with Java's rules (ParseValue) and printing as Kafka prints
//     (FormatValue, FormatJavaDouble);
//   - keys (Key: name, type, default, validator, documentation) and the
//     validators with Kafka's messages (Range, AtLeast, Between, OneOf,
//     ListOf, NonEmptyString, NonNullString, CustomValidator; ValueError
//     is ConfigException's text);
//   - broker synonyms (BrokerSynonym, SynonymUnit): the broker key that
//     gives a topic or group key its default;
//   - the topic-level key table (Kafka's LogConfig: TopicKeys,
//     ValidateTopic, TopicDefaultsFromBroker) and the effective topic
//     configuration the log runs with (Topic, BuildTopic);
//   - the group-level key table (Kafka's GroupConfig: GroupKeys,
//     ValidateGroup) and a group's effective configuration (Group,
//     EvaluateGroup).
//
// It does not own which component reads a key, the broker's own key table
// and server.properties loading (broker/config), where dynamic values are
// stored (the metadata image) or how DescribeConfigs layers the sources
// (broker/config). It imports nothing of Gregor's, so that storage, the
// broker, the controller's schema and the coordinators can all use it.
//
// Everything here is immutable after construction: key tables are built
// fresh on each call, so no caller can change another's view.
package config
