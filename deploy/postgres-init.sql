-- One database per Ember service (each owns its tables and migrations).
CREATE DATABASE engine;
CREATE DATABASE lifecycle_hook;
CREATE DATABASE plugin_registry;
CREATE DATABASE gateway;
