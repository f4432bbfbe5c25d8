#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /srv/task/out/reversed.txt | tr '\n' ' ')" = "three two one " ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
