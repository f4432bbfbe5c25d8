#!/bin/bash
sed '1!G;h;$!d' /srv/task/data/lines.txt > /srv/task/out/reversed.txt
