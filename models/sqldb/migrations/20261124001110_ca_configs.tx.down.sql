DROP TABLE ca_configs;
