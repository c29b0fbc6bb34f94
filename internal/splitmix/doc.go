// Package splitmix owns SplitMix64, the small generator and bit mixer the
// data generators (connector/datagen, connector/nexmark) derive their
// deterministic randomness from.
package splitmix
